// The model of a checkpoint comes from its saved run; the user's flags may add what is not
// the model (device, precision, layout) and may repeat the model's values, but a
// contradicting one is an error naming both values. The same from a checkpoint of this build
// (typed run_config) and of an older one (the arguments table, through the legacy reader).
#include <gtest/gtest.h>

#include "config/options.hpp"
#include "config/saved_run.hpp"
#include "core/errors.hpp"
#include "generation/checkpoint_args.hpp"

namespace gpt::generation {
namespace {

class CheckpointArgs : public ::testing::TestWithParam<bool> {
protected:
    SavedRun saved() const {
        Config c = parse_args(std::vector<std::string>{"--num-layers", "3", "--hidden-size", "48", "--num-attention-heads",
                                                       "4", "--seq-length", "32", "--vocab-file", "v.json",
                                                       "--merge-file", "m.txt", "--openai-gelu", "--layernorm-epsilon",
                                                       "1e-6", "--norm-epsilon", "1e-6", "--fp16"})
                       .config;
        return GetParam() ? decode_saved_run(encode_saved_run(c), "f.h5") : saved_run_from_table(format_arguments(c), "f.h5");
    }
};

TEST_P(CheckpointArgs, ModelComesFromTheCheckpoint) {
    const Config c = config_from_checkpoint(saved(), {"--device", "cpu", "--bf16"});
    EXPECT_EQ(c.model.num_layers, 3);
    EXPECT_EQ(c.model.hidden_size, 48);
    EXPECT_EQ(c.model.num_attention_heads, 4);
    EXPECT_EQ(c.model.seq_length, 32);
    EXPECT_TRUE(c.model.openai_gelu);
    EXPECT_EQ(c.model.layernorm_epsilon, 1e-6);
    EXPECT_EQ(c.model.norm_epsilon, 1e-6);  // Llama-style configs name it so
    EXPECT_EQ(c.data.vocab_file, "v.json");
    EXPECT_EQ(c.parallel.device, DeviceKind::Cpu);
    EXPECT_TRUE(c.training.bf16);    // the precision is the user's, not the training run's
    EXPECT_FALSE(c.training.fp16);
}

TEST_P(CheckpointArgs, AgreeingFlagsAndTokenizerLocationsAreAccepted) {
    const Config c = config_from_checkpoint(saved(), {"--num-layers", "3", "--layernorm-epsilon", "0.000001",
                                                      "--vocab-file", "elsewhere/v.json"});
    EXPECT_EQ(c.model.num_layers, 3);
    EXPECT_EQ(c.data.vocab_file, "elsewhere/v.json");
    EXPECT_EQ(c.data.merge_file, "m.txt");
}

TEST_P(CheckpointArgs, ContradictingFlagNamesBothValues) {
    try {
        config_from_checkpoint(saved(), {"--hidden-size", "64"});
        FAIL() << "no error";
    } catch (const UsageError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("--hidden-size: 48 in the checkpoint f.h5, 64 given"), std::string::npos) << m;
    }
    EXPECT_THROW(config_from_checkpoint(saved(), {"--no-bias-gelu-fusion"}), UsageError);
    try {
        config_from_checkpoint(saved(), {"--norm-epsilon", "1e-5"});
        FAIL() << "no error";
    } catch (const UsageError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("--norm-epsilon: 1e-06 in the checkpoint f.h5, 1e-05 given"), std::string::npos) << m;
    }
}

INSTANTIATE_TEST_SUITE_P(Readers, CheckpointArgs, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? std::string("Typed") : std::string("LegacyTable"); });

TEST(CheckpointArgsWithoutModel, IsADataError) {
    EXPECT_THROW(config_from_checkpoint(saved_run_from_table("  seed ........ 1\n", "f.h5"), {}), DataError);
}

}  // namespace
}  // namespace gpt::generation
