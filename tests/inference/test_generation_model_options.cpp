// gpt_generate's model options come from training's resolution (train/run/model_options.hpp):
// the model's own settings carried over, training's dropout, FP8, recompute and sequence
// parallelism off, whatever the checkpoint's run used.
#include <gtest/gtest.h>

#include "config/config.hpp"
#include "dist/rank_grid.hpp"
#include "train/run/model_options.hpp"
#include "train/run/run_config.hpp"

namespace gpt::train {
namespace {

TEST(GenerationModelOptions, TrainingsSettingsWithoutTrainingsExtras) {
    Config c;
    c.training.bf16 = true;
    c.model.hidden_dropout = 0.1;
    c.model.attention_dropout = 0.1;
    c.model.layernorm_epsilon = 1e-6;
    c.parallel.use_flash_attn = true;
    c.parallel.sequence_parallel = true;
    c.parallel.recompute_granularity = RecomputeGranularity::Full;
    c.parallel.recompute_num_layers = 1;
    c.fp8.fp8_format = Fp8Scheme::Hybrid;
    const model::ModelOptions trained = model_options_of(c, DType::BF16);
    ASSERT_TRUE(trained.fp8.on && trained.hidden_dropout > 0.0f && trained.sequence_parallel);

    const model::ModelOptions g = generation_model_options(c);
    EXPECT_EQ(g.dtype, DType::BF16);
    EXPECT_TRUE(g.flash_attention);
    EXPECT_EQ(g.tanh_gelu, trained.tanh_gelu);
    EXPECT_FLOAT_EQ(g.layernorm_eps, 1e-6f);
    EXPECT_EQ(g.hidden_dropout, 0.0f);
    EXPECT_EQ(g.attention_dropout, 0.0f);
    EXPECT_FALSE(g.fp8.on);
    EXPECT_FALSE(g.sequence_parallel);
    EXPECT_EQ(g.recompute, model::ModelOptions::Recompute::None);
}

// gpt_generate starts from a RunConfig (issue #35): resolved as training's run (dtype,
// device), with these options and the checkpoint's padded vocabulary, and nothing of training.
TEST(GenerationModelOptions, GenerationRunCarriesThemWithTheCheckpointsVocabulary) {
    Config c;
    c.training.bf16 = true;
    c.model.hidden_dropout = 0.1;
    c.parallel.sequence_parallel = true;
    c.parallel.device = DeviceKind::Cpu;
    const RunConfig run = generation_run(c, dist::RankGrid(2, 2, 1), 2, 640);
    EXPECT_EQ(run.dtype, DType::BF16);
    EXPECT_EQ(run.model_options.dtype, DType::BF16);
    EXPECT_EQ(run.model_options.hidden_dropout, 0.0f);
    EXPECT_FALSE(run.model_options.sequence_parallel);
    EXPECT_EQ(run.padded_vocab_size, 640);
    EXPECT_EQ(run.world_size, 2);
    EXPECT_EQ(run.device.kind, DeviceKind::Cpu);
    EXPECT_EQ(run.num_micro_batches, 0);
    EXPECT_EQ(run.data_positions, DataPositions{});
    c.parallel.device = DeviceKind::Auto;
    EXPECT_EQ(generation_run(c, dist::RankGrid(1, 1, 1), 1, 640).device.kind, resolve_device(DeviceKind::Auto).kind);
}

}  // namespace
}  // namespace gpt::train
