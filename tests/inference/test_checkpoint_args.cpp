// The model of a checkpoint comes from its saved arguments table; the user's flags may add
// what is not the model (device, precision, layout) and may repeat the model's values, but
// a contradicting one is an error naming both values.
#include <gtest/gtest.h>

#include "ckpt/args_check.hpp"
#include "config/options.hpp"
#include "core/errors.hpp"
#include "generation/checkpoint_args.hpp"

namespace gpt::generation {
namespace {

std::map<std::string, std::string> saved_table() {
    Config c = parse_args(std::vector<std::string>{"--num-layers", "3", "--hidden-size", "48", "--num-attention-heads",
                                                   "4", "--seq-length", "32", "--vocab-file", "v.json",
                                                   "--merge-file", "m.txt", "--openai-gelu", "--layernorm-epsilon",
                                                   "1e-6", "--fp16"})
                   .config;
    return ckpt::parse_arguments_table(format_arguments(c));
}

TEST(CheckpointArgs, ModelComesFromTheCheckpoint) {
    const Config c = config_from_checkpoint(saved_table(), {"--device", "cpu", "--bf16"}, "f.h5");
    EXPECT_EQ(c.model.num_layers, 3);
    EXPECT_EQ(c.model.hidden_size, 48);
    EXPECT_EQ(c.model.num_attention_heads, 4);
    EXPECT_EQ(c.model.seq_length, 32);
    EXPECT_TRUE(c.model.openai_gelu);
    EXPECT_DOUBLE_EQ(c.model.layernorm_epsilon, 1e-6);
    EXPECT_EQ(c.data.vocab_file, "v.json");
    EXPECT_EQ(c.parallel.device, DeviceKind::Cpu);
    EXPECT_TRUE(c.training.bf16);    // the precision is the user's, not the training run's
    EXPECT_FALSE(c.training.fp16);
}

TEST(CheckpointArgs, AgreeingFlagsAndTokenizerLocationsAreAccepted) {
    const Config c = config_from_checkpoint(saved_table(), {"--num-layers", "3", "--layernorm-epsilon", "0.000001",
                                                            "--vocab-file", "elsewhere/v.json"}, "f.h5");
    EXPECT_EQ(c.model.num_layers, 3);
    EXPECT_EQ(c.data.vocab_file, "elsewhere/v.json");
    EXPECT_EQ(c.data.merge_file, "m.txt");
}

TEST(CheckpointArgs, ContradictingFlagNamesBothValues) {
    try {
        config_from_checkpoint(saved_table(), {"--hidden-size", "64"}, "f.h5");
        FAIL() << "no error";
    } catch (const UsageError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("--hidden-size: 48 in the checkpoint f.h5, 64 given"), std::string::npos) << m;
    }
    EXPECT_THROW(config_from_checkpoint(saved_table(), {"--no-bias-gelu-fusion"}, "f.h5"), UsageError);
}

TEST(CheckpointArgs, TableWithoutTheModelIsADataError) {
    EXPECT_THROW(config_from_checkpoint({{"seed", "1"}}, {}, "f.h5"), DataError);
}

}  // namespace
}  // namespace gpt::generation
