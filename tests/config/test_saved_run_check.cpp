// check_checkpoint_args over a saved run, read from the typed data and from a legacy table
// alike: a head-count change is refused naming both values, a layout change is allowed.
#include <gtest/gtest.h>

#include "config/options.hpp"
#include "config/saved_run_check.hpp"
#include "core/errors.hpp"

namespace gpt {
namespace {

class SavedRunCheck : public ::testing::TestWithParam<bool> {
protected:
    // The saved run of `c` as a checkpoint of this build (typed) or of an older one (table).
    SavedRun saved(const Config& c, const std::string& file) const {
        return GetParam() ? decode_saved_run(encode_saved_run(c), file) : saved_run_from_table(format_arguments(c), file);
    }
};

Config saved_config() {
    return parse_args(std::vector<std::string>{"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
                                               "--seq-length", "64", "--vocab-size", "1000"})
        .config;
}

std::string refusal(const SavedRun& s, const Config& run) {
    try {
        check_checkpoint_args(s, run);
    } catch (const UsageError& e) {
        return e.what();
    }
    ADD_FAILURE() << "no UsageError";
    return "";
}

void expect_names(const std::string& msg, std::initializer_list<const char*> needles) {
    for (const char* n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
}

TEST_P(SavedRunCheck, HeadCountChangeIsRefusedLayoutChangeIsAllowed) {
    const Config c = saved_config();
    // Safe to change: layout, precision, batch sizes, LR schedule, dropout, intervals.
    Config run = c;
    run.parallel.tensor_model_parallel_size = 2;
    run.parallel.pipeline_model_parallel_size = 2;
    run.parallel.use_distributed_optimizer = true;
    run.model.make_vocab_size_divisible_by = 64;  // same padded vocabulary at TP 2
    run.training.bf16 = true;
    run.training.micro_batch_size = 4;
    run.training.global_batch_size = 64;
    run.optimizer.lr = 1e-4;
    run.optimizer.lr_decay_style = LrDecayStyle::Cosine;
    run.model.hidden_dropout = 0.0;
    run.model.ffn_hidden_size = 256;  // = 4 x hidden, the default spelled out
    EXPECT_NO_THROW(check_checkpoint_args(saved(c, "F"), run));
    // Changing the meaning of the tensors is not.
    Config heads = c;
    heads.model.num_attention_heads = 8;
    expect_names(refusal(saved(c, "F.h5"), heads), {"F.h5", "--num-attention-heads: 4 in the checkpoint, 8 in this run"});
    Config several = c;
    several.model.num_layers = 3;
    several.model.ffn_hidden_size = 100;
    several.model.max_position_embeddings = 128;
    several.model.no_bias_gelu_fusion = true;  // exact erf instead of the tanh approximation
    expect_names(refusal(saved(c, "F"), several),
                 {"--num-layers: 2 in the checkpoint, 3", "--ffn-hidden-size: 256 in the checkpoint, 100",
                  "--max-position-embeddings: 64 in the checkpoint, 128", "GELU"});
    Config vocab = c;
    vocab.model.make_vocab_size_divisible_by = 100;
    expect_names(refusal(saved(c, "F"), vocab), {"--padded-vocab-size: 1024 in the checkpoint, 1000 in this run"});
}

TEST_P(SavedRunCheck, ArchitectureAndTokenizerArgumentsAreCompared) {
    Config c = saved_config();
    c.model.rotary_base = 500000;
    Config run = c;
    run.model.rotary_base = 10000;
    run.model.swiglu = true;
    expect_names(refusal(saved(c, "F"), run),
                 {"--rotary-base: 500000 in the checkpoint, 10000 in this run", "--swiglu: False in the checkpoint, True"});
    // Squared ReLU against GELU is compared by its flag; between two squared-ReLU runs the
    // GELU flags choose nothing and are not.
    Config relu2 = c;
    relu2.model.squared_relu = true;
    expect_names(refusal(saved(c, "F"), relu2), {"--squared-relu: False in the checkpoint, True in this run"});
    Config erf = relu2;
    erf.model.no_bias_gelu_fusion = true;
    EXPECT_NO_THROW(check_checkpoint_args(saved(relu2, "F"), erf));
    expect_names(refusal(saved(relu2, "F"), c), {"--squared-relu: True in the checkpoint, False in this run"});
    Config one_p = c;
    one_p.model.apply_layernorm_1p = true;
    expect_names(refusal(saved(c, "F"), one_p), {"--apply-layernorm-1p: False in the checkpoint, True in this run"});
    Config qk = c;
    qk.model.qk_layernorm = true;
    expect_names(refusal(saved(qk, "F"), c), {"--qk-layernorm: True in the checkpoint, False in this run"});
    // A tokenizer pattern nobody set (None) is not known: not compared.
    Config pattern = c;
    pattern.data.tiktoken_pattern = "v2";
    EXPECT_NO_THROW(check_checkpoint_args(saved(c, "F"), pattern));
}

INSTANTIATE_TEST_SUITE_P(Readers, SavedRunCheck, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? std::string("Typed") : std::string("LegacyTable"); });

TEST(SavedRunCheck, AnArgumentAnOlderTableLacksIsNotCompared) {
    const SavedRun old = saved_run_from_table("  num_layers ........ 2\n  hidden_size ........ 64\n", "F");
    Config run = saved_config();
    run.model.num_attention_heads = 8;
    run.model.swiglu = true;
    EXPECT_NO_THROW(check_checkpoint_args(old, run));
    run.model.num_layers = 3;
    expect_names(refusal(old, run), {"--num-layers: 2 in the checkpoint, 3 in this run"});
}

}  // namespace
}  // namespace gpt
