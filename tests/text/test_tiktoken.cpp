// TikTokenizer: ids equal npm tiktoken's (cl100k_base, o200k_base, and Megatron's v1/v2
// patterns over cl100k's ranks) on the tokenizer corpus, adversarial cases and random
// Unicode; Megatron's special-token layout and vocab-size rules; rank file validation.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "core/errors.hpp"
#include "text/tiktoken_tokenizer.hpp"
#include "text/utf8.hpp"
#include "data_test_util.hpp"
#include "test_env.hpp"

using namespace gpt::data;
using namespace gpt::data::test;

namespace {

constexpr int kSpecial = 3;  // the smallest Megatron allows: <unk> <s> </s>

const TikTokenizer& tokenizer(const std::string& encoding, const std::string& pattern) {
    static std::map<std::string, std::unique_ptr<TikTokenizer>> cache;
    auto& t = cache[encoding + "/" + pattern];
    if (!t) {
        TikTokenizerOptions o;
        o.path = tiktoken_rank_file(encoding);
        o.pattern = pattern;
        o.num_special_tokens = kSpecial;
        t = std::make_unique<TikTokenizer>(TikTokenizer::load(o));
    }
    return *t;
}

std::vector<std::string> adversarial_texts() {
    std::vector<std::string> t = {
        // contractions in odd cases and places
        "don't DON'T Don'T it's IT'S we'LL they'Re I'M you'VE he'D 'sup 'S ''s '''ll",
        "it'\u017F IT'\u017F",  // 's with U+017F long s, which case-folds to s
        "rock'n'roll o'clock l'amour dell'arte 's", "'\n's\n'",
        // digits
        "1234567890123 12,345,678.90 0x1F2e 3.14159e-10 ١٢٣٤٥ ①②③ ⅫⅩ 𝟙𝟚𝟛 ٣٤ 12a34b",
        // whitespace runs
        "a  b   c    d\t\te \t \tf\n\ng\r\n\r\nh \n \n i\u00A0\u00A0j\u3000\u3000k\u2028l\u0085m   ",
        "   ", "\n", " \n", "\n ", "\t\tword", "\u3000word", "x\u3000 \u3000y", "end  \n\n  ",
        // punctuation and slashes
        "a//b ///c /\n/ +//\n\n/ http://example.com/path?q=1&r=2 <|endoftext|> <s></s>",
        "((nested)) [brackets] {braces} ... !!! ??? --- ___ *** \"quotes\" «guillemets» „German“",
        // scripts and case
        "Ελληνικά Кириллица العربية עברית हिन्दी ไทย 中文字符 日本語のテキスト 한국어 ქართული",
        "camelCaseWord XMLHttpRequest iPhone ÉCOLE École ǅungla ǈubljana ᾈᾉ",  // Lt titlecase letters
        "aǅ dǅb ǈǈǈ helloǅWorld xᾈy ᾈᾈ ǅ'S ǅ'll",  // Lt after lower case: a split in o200k only
        "ʰʲʷ ˈstress ゝゞ 々 ー カタカナー",  // Lm modifier letters
        // combining marks (M is neither L nor N), alone, leading, after digits and spaces
        "e\u0301 \u0301start a\u0301\u0302\u0303 1\u0301 \u0301\u0301 x \u20DD Z\u0308A\u0308\u0301 ",
        "\u0915\u094D\u0937\u093F \u0928\u092E\u0938\u094D\u0924\u0947",
        // emoji: ZWJ sequences, modifiers, flags, variation selectors
        "👨‍👩‍👧‍👦 👍🏽 🇫🇷🇩🇪 ❤️ ☺︎ 🏳️‍🌈 a😀b 😀😀😀",
        // control characters and odd spaces
        std::string("nul\0byte", 8), "\x01\x02\x7F bell\x07 \u200B\u200C\u200D \uFEFFbom",
        // long runs (the heap BPE path)
        std::string(300, 'a'), std::string(200, '9'), std::string(150, ' ') + "x", std::string(120, '!'),
        "aGVsbG8gd29ybGQgdGhpcyBpcyBhIGxvbmcgYmFzZTY0IHN0cmluZyB3aXRob3V0IGFueSBzcGFjZXMgYXQgYWxsIGZvciB0ZXN0aW5n",
        "",
    };
    return t;
}

std::vector<std::string> all_texts() {
    std::vector<std::string> texts = read_json_string_lines(gpt::test::source_dir() + "/tests/text/corpus/tokenizer_cases.jsonl");
    for (auto& s : adversarial_texts()) texts.push_back(s);
    for (auto& s : random_texts(1500, 2718)) texts.push_back(s);
    return texts;
}

void expect_same_as_tiktoken(const std::string& encoding, const std::string& pattern, const std::string& megatron_pattern) {
    const std::vector<std::string> texts = all_texts();
    const auto expected = tiktoken_ids(texts, gpt::test::scratch_dir("tiktoken_" + pattern), encoding, megatron_pattern);
    const TikTokenizer& tok = tokenizer(encoding, pattern);
    auto enc = tok.make_encoder();
    int mismatches = 0;
    for (std::size_t i = 0; i < texts.size(); ++i) {
        std::vector<std::int32_t> ids;
        enc->encode(texts[i], ids);
        std::vector<std::int32_t> want = expected[i];
        for (auto& id : want) id += kSpecial;  // Megatron's ids: rank + num_special_tokens
        if (ids != want && ++mismatches <= 5)
            ADD_FAILURE() << pattern << " text " << i << " " << json_string(texts[i]) << ": ids differ from tiktoken";
        EXPECT_EQ(tok.encode(texts[i]), ids) << "uncached encode of text " << i;
        EXPECT_EQ(tok.decode(ids), texts[i]) << "round trip of text " << i;
    }
    EXPECT_EQ(mismatches, 0);
}

}  // namespace

TEST(TikTokenizer, Cl100kIdsEqualTiktoken) { expect_same_as_tiktoken("cl100k_base", "cl100k_base", ""); }
TEST(TikTokenizer, O200kIdsEqualTiktoken) { expect_same_as_tiktoken("o200k_base", "o200k_base", ""); }
TEST(TikTokenizer, MegatronV1IdsEqualTiktoken) { expect_same_as_tiktoken("cl100k_base", "v1", "v1"); }
TEST(TikTokenizer, MegatronV2IdsEqualTiktoken) { expect_same_as_tiktoken("cl100k_base", "v2", "v2"); }

// The pieces themselves against node's regex engine (whose Unicode tables generated ours):
// BPE often gives the same ids for different splits, so ids alone miss splitter mistakes.
void expect_same_pieces(const std::string& pattern) {
    const std::vector<std::string> texts = all_texts();
    const std::string dir = gpt::test::scratch_dir("tiktoken_pieces_" + pattern);
    std::string body;
    for (const auto& t : texts) body += json_string(t) + "\n";
    write_file(dir + "/in.jsonl", body);
    std::string log;
    ASSERT_EQ(run_command("node '" + gpt::test::source_dir() + "/tests/peers/split_pieces.js' '" + dir + "/in.jsonl' " +
                              pattern + " > '" + dir + "/out.jsonl'", log), 0) << log;
    const std::string out = read_file(dir + "/out.jsonl");
    std::size_t pos = 0;
    int mismatches = 0;
    for (std::size_t i = 0; i < texts.size(); ++i) {
        const std::size_t eol = out.find('\n', pos);
        ASSERT_NE(eol, std::string::npos) << "node gave " << i << " of " << texts.size() << " lines";
        std::string want = out.substr(pos, eol - pos), got = "[";
        pos = eol + 1;
        for_each_tik_piece(texts[i], TikTokenizer::parse_pattern(pattern), [&](std::size_t b, std::size_t e) {
            got += (got.size() > 1 ? "," : "") + std::to_string(e - b);
        });
        got += "]";
        if (got != want && ++mismatches <= 5)
            ADD_FAILURE() << pattern << " text " << i << " " << json_string(texts[i]) << ": piece lengths " << got
                          << ", node's regex " << want;
    }
    EXPECT_EQ(mismatches, 0);
}

TEST(TikTokenizer, Cl100kPiecesEqualRegex) { expect_same_pieces("cl100k_base"); }
TEST(TikTokenizer, O200kPiecesEqualRegex) { expect_same_pieces("o200k_base"); }
TEST(TikTokenizer, MegatronV2PiecesEqualRegex) { expect_same_pieces("v2"); }

TEST(TikTokenizer, ShortAndHeapBpeAgree) {
    // The heap path (pieces above 64 bytes) must make tiktoken's leftmost-lowest merges too.
    const TikTokenizer& tok = tokenizer("o200k_base", "o200k_base");
    for (const std::string& base : {std::string("abracadabra"), std::string("0123456789"), std::string("ababab"),
                                    std::string("\xF0\x9F\x98\x80x")}) {
        std::string piece;
        while (piece.size() <= 64) piece += base;
        std::vector<std::int32_t> direct;
        tok.encode_piece(piece, direct);
        EXPECT_EQ(tok.decode(direct), piece);
        // The same bytes as one chunk of a text whose pre-tokenisation keeps it whole.
        EXPECT_GT(direct.size(), 1u);
    }
}

TEST(TikTokenizer, MegatronSpecialTokenLayout) {
    TikTokenizerOptions o;
    o.path = tiktoken_rank_file("cl100k_base");
    o.pattern = "cl100k_base";  // Megatron's default --tiktoken-num-special-tokens 1000
    const TikTokenizer t = TikTokenizer::load(o);
    EXPECT_EQ(t.num_special_tokens(), 1000);
    EXPECT_EQ(t.num_ranks(), 100256);
    EXPECT_EQ(t.vocab_size(), 101256);
    EXPECT_EQ(t.eod(), 2);  // </s>
    ASSERT_EQ(t.special_tokens().size(), 1000u);
    EXPECT_EQ(t.special_tokens()[3], "<SPECIAL_3>");
    EXPECT_EQ(t.special_tokens()[999], "<SPECIAL_999>");
    EXPECT_EQ(t.encode("hello"), std::vector<std::int32_t>{15339 + 1000});  // tiktoken's rank 15339
    // Special token text is ordinary text (encode_ordinary).
    EXPECT_EQ(t.decode(t.encode("</s>")), "</s>");
    EXPECT_GT(t.encode("</s>").size(), 1u);
    const std::int32_t eod = t.eod();
    EXPECT_EQ(t.decode(std::span<const std::int32_t>(&eod, 1)), "</s>");

    o.special_tokens = {"<s>", "</s>", "<pad>", "<unk>"};
    o.num_special_tokens = 4;
    const TikTokenizer custom = TikTokenizer::load(o);
    EXPECT_EQ(custom.eod(), 1);
    EXPECT_EQ(custom.vocab_size(), 100260);

    o.vocab_size = 50004;  // Megatron cuts the ranks to vocab_size - num_special_tokens
    const TikTokenizer cut = TikTokenizer::load(o);
    EXPECT_EQ(cut.vocab_size(), 50004);
    EXPECT_EQ(cut.num_ranks(), 50000);
    EXPECT_EQ(cut.decode(cut.encode("tokenization of rare words")), "tokenization of rare words");
}

TEST(TikTokenizer, RejectsBadOptions) {
    TikTokenizerOptions o;
    o.path = tiktoken_rank_file("cl100k_base");
    o.pattern = "cl100k_base";
    auto fails = [&](TikTokenizerOptions bad, const std::string& what) {
        try {
            TikTokenizer::load(bad);
            ADD_FAILURE() << "accepted: " << what;
        } catch (const gpt::UsageError& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
    };
    auto b = o; b.pattern = "";             fails(b, "--tiktoken-pattern is required");
    b = o; b.pattern = "gpt4";              fails(b, "'gpt4' is unknown");
    b = o; b.num_special_tokens = 2;        fails(b, "fewer than the 3 special tokens");
    b = o; b.special_tokens = {"<unk>", "<s>"};  fails(b, "</s> is missing");
    b = o; b.special_tokens = {"<unk>", "<s>", "</s>", "<s>"};  fails(b, "lists <s> twice");
    b = o; b.vocab_size = 200000;           fails(b, "has 100256");
    b = o; b.path = "";                     fails(b, "needs --tokenizer-model");
}

TEST(TikTokenizer, RejectsBadRankFiles) {
    const std::string dir = gpt::test::scratch_dir("tiktoken_bad");
    std::string bytes;
    for (int b = 0; b < 256; ++b) {
        std::string one(1, static_cast<char>(b)), b64;
        static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const unsigned v = static_cast<unsigned char>(one[0]);
        b64 = std::string{digits[v >> 2], digits[(v & 3) << 4], '=', '='};
        bytes += b64 + " " + std::to_string(b) + "\n";
    }
    auto fails = [&](const std::string& contents, const std::string& what) {
        const std::string path = dir + "/bad.tiktoken";
        write_file(path, contents);
        TikTokenizerOptions o;
        o.path = path;
        o.pattern = "v2";
        try {
            TikTokenizer::load(o);
            ADD_FAILURE() << "accepted: " << what;
        } catch (const gpt::DataError& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
        }
    };
    write_file(dir + "/ok.tiktoken", bytes + "aGk= 256\n");
    TikTokenizerOptions ok;
    ok.path = dir + "/ok.tiktoken";
    ok.pattern = "v2";
    ok.num_special_tokens = 3;
    EXPECT_EQ(TikTokenizer::load(ok).encode("hi"), std::vector<std::int32_t>{259});
    fails(bytes + "aGk 256\n", "line 257");                 // bad base64
    fails(bytes + "aGk= 2x\n", "line 257");                 // bad rank
    fails(bytes + "aGk= 255\n", "each used once");          // repeated rank
    fails(bytes.substr(bytes.find('\n') + 1) + "aGk= 0\n", "no token for byte 0");
    fails("[{\"rank\": 0}]", "Megatron's JSON list");
}

TEST(TikTokenizer, MegatronJsonRankFileEqualsTiktokenFormat) {
    // Megatron's reload_mergeable_ranks format holds the same ranks.
    const std::string text = read_file(tiktoken_rank_file("cl100k_base"));
    std::string json = "[";
    std::size_t pos = 0;
    while (pos < text.size()) {
        const std::size_t eol = text.find('\n', pos), sp = text.find(' ', pos);
        if (json.size() > 1) json += ",\n";
        json += "{\"rank\": " + text.substr(sp + 1, eol - sp - 1) + ", \"token_bytes\": \"" + text.substr(pos, sp - pos) +
                "\", \"token_str\": \"\"}";
        pos = eol + 1;
    }
    json += "]";
    const std::string path = gpt::test::scratch_dir("tiktoken_json") + "/cl100k.json";
    write_file(path, json);
    TikTokenizerOptions o;
    o.path = path;
    o.pattern = "cl100k_base";
    o.num_special_tokens = kSpecial;
    const TikTokenizer from_json = TikTokenizer::load(o);
    const TikTokenizer& from_text = tokenizer("cl100k_base", "cl100k_base");
    for (const auto& t : adversarial_texts()) EXPECT_EQ(from_json.encode(t), from_text.encode(t)) << json_string(t);
}
