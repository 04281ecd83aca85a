// The saved run (config/saved_run.hpp): every flag a checkpoint stores comes back exactly,
// awkward values included (doubles to the bit, strings with quotes, spaces, UTF-8 or
// nothing, lists); the legacy reader reads a real arguments table into what the typed data
// gives; a damaged or newer run_config is one DataError naming the file and the key.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "config/options.hpp"
#include "config/saved_run.hpp"
#include "core/errors.hpp"

namespace gpt {
namespace {

// Equal to the bit for doubles (-0.0 is not 0.0, NaN is NaN), else ==.
bool same_bits(const OptionValue& a, const OptionValue& b) {
    if (std::holds_alternative<double>(a) && std::holds_alternative<double>(b)) {
        const double x = std::get<double>(a), y = std::get<double>(b);
        return std::memcmp(&x, &y, sizeof x) == 0 || (std::isnan(x) && std::isnan(y));
    }
    return a == b;
}

// A value of the field's type that differs from its default and that only an exact codec
// keeps: doubles one ulp off a short decimal, strings a table could not print back. An
// enum takes only its spellings: nullopt (tests below set enums by hand).
std::optional<OptionValue> awkward(const OptionField& f) {
    Config c;
    const OptionValue def = f.get(c);
    struct Pick {
        const OptionField& f;
        Config& c;
        std::optional<OptionValue> operator()(bool v) const { return OptionValue(!v); }
        std::optional<OptionValue> operator()(std::int64_t) const {
            // int fields refuse what does not fit 32 bits; int64 ones take it.
            try {
                f.set(c, std::int64_t{-(std::int64_t{1} << 40) - 3});
                return OptionValue(std::int64_t{-(std::int64_t{1} << 40) - 3});
            } catch (const std::out_of_range&) {
                return OptionValue(std::int64_t{std::numeric_limits<int>::min()});
            }
        }
        std::optional<OptionValue> operator()(std::uint64_t) const {
            return OptionValue(std::numeric_limits<std::uint64_t>::max());
        }
        std::optional<OptionValue> operator()(double v) const {
            return OptionValue(std::nextafter(v == 0.0 ? 0.1 : v, std::numeric_limits<double>::infinity()));
        }
        std::optional<OptionValue> operator()(const std::string& v) const {
            const std::string s = " a \"b\" \\ c\td\n\xc3\xbc, None '" + v;
            try {
                f.set(c, s);
            } catch (const UsageError&) {
                return std::nullopt;  // an enum
            }
            return OptionValue(s);
        }
        std::optional<OptionValue> operator()(const std::vector<std::int64_t>&) const {
            return OptionValue(std::vector<std::int64_t>{-1, 0, std::numeric_limits<int>::max()});
        }
        std::optional<OptionValue> operator()(const std::vector<std::string>&) const {
            return OptionValue(std::vector<std::string>{"", "a b", "x', 'y", "\"q\"", "\xe2\x82\xac", "None"});
        }
    };
    return std::visit(Pick{f, c}, def);
}

TEST(SavedRun, EveryFieldRoundTripsExactly) {
    Config c;
    int set = 0;
    for (const OptionField& f : option_fields()) {
        const auto v = awkward(f);
        if (!v) continue;
        ASSERT_FALSE(same_bits(*v, f.get(Config{}))) << f.key << ": the awkward value is the default";
        f.set(c, *v);
        ++set;
    }
    ASSERT_GT(set, 100);  // every flag but the enums
    c.model.vocab_size = 50257;
    const SavedRun r = decode_saved_run(encode_saved_run(c), "f.h5");
    EXPECT_EQ(r.version, kSavedRunVersion);
    EXPECT_EQ(r.file, "f.h5");
    for (const OptionField& f : option_fields()) {
        EXPECT_TRUE(r.has(f.key)) << f.key << " not stored";
        EXPECT_TRUE(same_bits(f.get(r.config), f.get(c)))
            << f.key << ": " << option_value_text(f.get(r.config)) << " read back, " << option_value_text(f.get(c))
            << " saved";
    }
    EXPECT_EQ(r.keys.size(), option_fields().size() + 1);  // and padded_vocab_size
    EXPECT_EQ(r.padded_vocab_size, c.padded_vocab_size());
}

TEST(SavedRun, SpecialDoublesKeepTheirBits) {
    for (double v : {-0.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 0.1 + 0.2, 1e-5,
                     std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
        Config c;
        c.model.rotary_base = v;
        const SavedRun r = decode_saved_run(encode_saved_run(c), "f");
        EXPECT_TRUE(same_bits(r.config.model.rotary_base, v)) << v;
    }
}

TEST(SavedRun, EnumsAndTheFieldsReadersUse) {
    Config c = parse_args(std::vector<std::string>{
                              "--num-layers", "3", "--hidden-size", "48", "--num-attention-heads", "4",
                              "--seq-length", "32", "--vocab-size", "1000", "--position-embedding-type", "rope",
                              "--normalization", "RMSNorm", "--swiglu", "--group-query-attention",
                              "--num-query-groups", "2", "--tokenizer-type", "TikTokenizer", "--lr-decay-style",
                              "cosine", "--recompute-granularity", "full", "--recompute-method", "block",
                              "--tiktoken-special-tokens", "<unk>", "<s>", "</s>", "--seed", "18446744073709551615"})
                   .config;
    const SavedRun r = decode_saved_run(encode_saved_run(c), "f");
    EXPECT_EQ(r.config.model.position_embedding_type, PositionEmbeddingType::Rope);
    EXPECT_EQ(r.config.model.normalization, Normalization::RMSNorm);
    EXPECT_EQ(r.config.data.tokenizer_type, TokenizerType::TikTokenizer);
    EXPECT_EQ(r.config.optimizer.lr_decay_style, LrDecayStyle::Cosine);
    EXPECT_EQ(r.config.parallel.recompute_granularity, RecomputeGranularity::Full);
    EXPECT_EQ(r.config.parallel.recompute_method, RecomputeMethod::Block);
    EXPECT_EQ(r.config.data.tiktoken_special_tokens, (std::vector<std::string>{"<unk>", "<s>", "</s>"}));
    EXPECT_EQ(r.config.training.seed, std::numeric_limits<std::uint64_t>::max());
    EXPECT_EQ(r.config.model.num_query_groups, 2);
    // An enum's "not given" spelling is the empty string; it comes back as such.
    EXPECT_EQ(decode_saved_run(encode_saved_run(Config{}), "f").config.parallel.recompute_granularity,
              RecomputeGranularity::None);
    EXPECT_EQ(decode_saved_run(encode_saved_run(Config{}), "f").padded_vocab_size, 0);
}

// A run as gpt_pretrain resolves it, with values the table prints exactly.
Config realistic_run() {
    Config c = parse_args(std::vector<std::string>{
                              "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
                              "--seq-length", "64", "--max-position-embeddings", "128", "--vocab-size", "50257",
                              "--tensor-model-parallel-size", "2", "--lr", "0.00015", "--min-lr", "1e-05",
                              "--lr-decay-style", "cosine", "--lr-warmup-fraction", "0.01", "--train-iters",
                              "500", "--global-batch-size", "16", "--bf16", "--use-distributed-optimizer",
                              "--data-path", "0.3", "/d/a", "0.7", "/d/c", "--split", "98, 2, 0",
                              "--vocab-file", "/v/vocab.json", "--merge-file", "/v/merges.txt", "--save",
                              "/ck", "--layernorm-epsilon", "1e-06", "--rotary-base", "500000",
                              "--tiktoken-special-tokens", "<unk>", "<s>", "</s>", "--profile-ranks", "0", "3"})
                   .config;
    return c;
}

TEST(SavedRun, LegacyReaderAgreesWithTheTypedDataOnARealTable) {
    const Config c = realistic_run();
    const SavedRun typed = decode_saved_run(encode_saved_run(c), "f");
    // The table as a checkpoint of an older build holds it (the printed one has the
    // environment's rows too: they are not flags and are skipped).
    for (const std::string& table : {format_arguments(c), format_arguments(c, {{"GPT_CPU_CORES", "None"}})}) {
        const SavedRun legacy = saved_run_from_table(table, "f");
        EXPECT_EQ(legacy.version, 0);
        EXPECT_EQ(legacy.keys, typed.keys);
        EXPECT_EQ(legacy.padded_vocab_size, typed.padded_vocab_size);
        // Exactly, but doubles: the table printed 6 digits (2^32, the initial loss scale, as
        // 4.29497e+09), so those agree as printed.
        for (const OptionField& f : option_fields())
            EXPECT_TRUE(legacy.same(f.get(legacy.config), f.get(typed.config)))
                << f.key << ": legacy " << option_value_text(f.get(legacy.config)) << ", typed "
                << option_value_text(f.get(typed.config));
    }
}

TEST(SavedRun, LegacyDoublesAgreeAsTheTablePrintedThem) {
    Config c = realistic_run();
    c.optimizer.lr = 1.23456789e-4;  // the table keeps 6 digits
    const SavedRun legacy = saved_run_from_table(format_arguments(c), "f");
    const SavedRun typed = decode_saved_run(encode_saved_run(c), "f");
    EXPECT_EQ(legacy.config.optimizer.lr, 1.23457e-4);
    EXPECT_EQ(typed.config.optimizer.lr, c.optimizer.lr);
    EXPECT_TRUE(legacy.same(legacy.config.optimizer.lr, c.optimizer.lr));
    EXPECT_FALSE(typed.same(typed.config.optimizer.lr, 1.23457e-4));
}

TEST(SavedRun, LegacyReaderTakesMegatronSpellingsAndRefusesOtherArchitectures) {
    std::string base = format_arguments(realistic_run());
    // This build's table has kv_channels, squared_relu, apply_layernorm_1p, qk_layernorm and
    // decoupled_lr rows of its own; the rows below stand for Megatron's.
    for (const char* own :
         {"  kv_channels ", "  squared_relu ", "  apply_layernorm_1p ", "  qk_layernorm ", "  decoupled_lr "}) {
        const std::size_t at = base.find(own);
        ASSERT_NE(at, std::string::npos) << own;
        base.erase(at, base.find('\n', at) + 1 - at);
    }
    auto with = [&](const std::string& row) {
        return "------------------------ arguments ------------------------\n  " + row + "\n" + base;
    };
    const SavedRun rope = saved_run_from_table(with("use_rotary_position_embeddings ........ True"), "f");
    EXPECT_EQ(rope.config.model.position_embedding_type, PositionEmbeddingType::Rope);
    EXPECT_TRUE(saved_run_from_table(with("add_bias_linear ........ False"), "f").config.model.disable_bias_linear);
    EXPECT_NO_THROW(saved_run_from_table(with("apply_residual_connection_post_layernorm ........ False"), "f"));
    EXPECT_TRUE(saved_run_from_table(with("qk_layernorm ........ True"), "f").config.model.qk_layernorm);
    EXPECT_TRUE(saved_run_from_table(with("squared_relu ........ True"), "f").config.model.squared_relu);
    EXPECT_TRUE(saved_run_from_table(with("apply_layernorm_1p ........ True"), "f").config.model.apply_layernorm_1p);
    EXPECT_NO_THROW(saved_run_from_table(with("kv_channels ........ 16"), "f"));
    EXPECT_EQ(saved_run_from_table(with("decoupled_lr ........ None"), "f").config.optimizer.decoupled_lr,
              OptimizerConfig::kLrNotGiven);
    EXPECT_EQ(saved_run_from_table(with("decoupled_lr ........ 0.0003"), "f").config.optimizer.decoupled_lr, 3e-4);
    EXPECT_EQ(saved_run_from_table(with("kv_channels ........ None"), "f").config.model.kv_channels, 0);
    try {
        saved_run_from_table(with("apply_residual_connection_post_layernorm ........ True"), "old.h5");
        FAIL() << "no error";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("old.h5: --apply_residual_connection_post_layernorm is True"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_THROW(saved_run_from_table(with("kv_channels ........ 32"), "f"), UsageError);
    // An older build's table lacks newer rows: they are absent, not defaults claimed as saved.
    const SavedRun old = saved_run_from_table("  num_layers ........ 2\n  hidden_size ........ 8\n", "f");
    EXPECT_TRUE(old.has("num_layers"));
    EXPECT_FALSE(old.has("rotary_base"));
    EXPECT_EQ(old.keys.size(), 2u);
}

// The message of the DataError decode_saved_run throws for `text`.
std::string decode_error(const std::string& text) {
    try {
        decode_saved_run(text, "/ck/iter_0000010/model.h5");
    } catch (const DataError& e) {
        return e.what();
    }
    ADD_FAILURE() << "no DataError for:\n" << text;
    return "";
}

void expect_names(const std::string& msg, std::initializer_list<const char*> needles) {
    for (const char* n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
}

TEST(SavedRun, DamagedOrNewerDataIsOneClearError) {
    const std::string file = "/ck/iter_0000010/model.h5";
    expect_names(decode_error("version 2\nnum_layers int 2\n"), {file.c_str(), "run_config", "version 2", "version 1"});
    expect_names(decode_error("num_layers int 2\n"), {file.c_str(), "run_config", "format version"});
    expect_names(decode_error("version 1\nlr double 1e-4x\n"), {file.c_str(), "run_config", "'lr'", "1e-4x"});
    expect_names(decode_error("version 1\nlr str \"a\"\n"), {file.c_str(), "'lr'", "stored as str", "double"});
    expect_names(decode_error("version 1\nnum_layers int 2\nnum_layers int 3\n"), {"'num_layers'", "twice"});
    expect_names(decode_error("version 1\nnum_layers int 9999999999\n"), {"'num_layers'", "32-bit"});
    expect_names(decode_error("version 1\nnormalization str \"BatchNorm\"\n"), {"'normalization'", "BatchNorm"});
    expect_names(decode_error("version 1\nvocab_file str \"abc\n"), {"'vocab_file'", "unterminated"});
    expect_names(decode_error("version 1\nvocab_file str \"\\q\"\n"), {"'vocab_file'", "escape"});
    expect_names(decode_error("version 1\nnum_layers\n"), {"'num_layers'", "key type value"});
    expect_names(decode_error("version 1\nprofile_ranks ints [1,2]\n"), {"'profile_ranks'"});
    // A newer build's flag is not this build's concern.
    const SavedRun r = decode_saved_run("version 1\nsome_future_flag bool true\nnum_layers int 7\n", file);
    EXPECT_EQ(r.config.model.num_layers, 7);
    EXPECT_FALSE(r.has("some_future_flag"));
}

TEST(SavedRun, TheAttributeIsPrintableAscii) {
    Config c;
    c.data.vocab_file = "\xc3\xbc\n\x01";
    const std::string text = encode_saved_run(c);
    for (char ch : text) EXPECT_TRUE(ch == '\n' || (ch >= 0x20 && ch < 0x7f)) << int(ch);
    EXPECT_NE(text.find("vocab_file str \"\\xc3\\xbc\\x0a\\x01\"\n"), std::string::npos);
}

}  // namespace
}  // namespace gpt
