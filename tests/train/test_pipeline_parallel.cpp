// Pipeline parallelism in the trainer: 1F1B and interleaved schedules, alone and combined
// with tensor and data parallelism, must train exactly like one rank: the same lm loss and
// grad norm every iteration, the same final parameters (the last stage's copy of the tied
// word embeddings included), and the same evaluation loss.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "train/step/chunk_layout.hpp"
#include "train/trainer.hpp"
#include "parallel_match.hpp"
#include "trainer_test_util.hpp"

namespace gpt::train {
namespace {

struct Layout {
    int tp = 1, pp = 1, per_virtual = 0;  // per_virtual: layers per virtual stage (0: 1F1B)
    // Dropout follows the global micro-batch (not the stage or chunk), so runs with it on
    // must match too.
    double dropout = 0.0;
    // Uneven stages (config/pipeline_split.hpp): the model's layers (0: the tiny 4), the
    // split flags and --num-virtual-stages-per-pipeline-rank.
    int layers = 0;
    PipelineSplit split = {};
    int virtual_stages = 0;
    std::string layout;  // --pipeline-model-parallel-layout
};

Config pipeline_config(const Layout& l) {
    Config c = test::tiny::layers4(6);  // 2 stages x 2 virtual stages x 1 layer
    c.parallel.tensor_model_parallel_size = l.tp;
    c.parallel.pipeline_model_parallel_size = l.pp;
    c.parallel.num_layers_per_virtual_pipeline_stage = l.per_virtual;
    c.model.hidden_dropout = l.dropout;
    c.model.attention_dropout = l.dropout;
    if (l.layers > 0) c.model.num_layers = l.layers;
    c.parallel.decoder_first_pipeline_num_layers = l.split.first_stage_layers;
    c.parallel.decoder_last_pipeline_num_layers = l.split.last_stage_layers;
    c.parallel.account_for_embedding_in_pipeline_split = l.split.account_for_embedding;
    c.parallel.account_for_loss_in_pipeline_split = l.split.account_for_loss;
    c.parallel.num_virtual_stages_per_pipeline_rank = l.virtual_stages;
    c.parallel.pipeline_model_parallel_layout = l.layout;
    return c;
}

using test::world_size;

void expect_matches_one_rank(const Layout& l) {
    const Config cfg = pipeline_config(l);
    Config single = cfg;
    single.parallel = ParallelConfig{};
    const test::Run ref = test::train_run(single, MPI_COMM_SELF);
    const test::Run got = test::train_run(cfg, MPI_COMM_WORLD);
    const std::string what = "TP " + std::to_string(l.tp) + " PP " + std::to_string(l.pp) +
                             " DP " + std::to_string(world_size() / (l.tp * l.pp)) +
                             " layers/virtual " + std::to_string(l.per_virtual) + " uneven " +
                             std::to_string(l.split.first_stage_layers) + "/" + std::to_string(l.split.last_stage_layers) +
                             (l.split.account_for_embedding ? " +embedding" : "") +
                             (l.split.account_for_loss ? " +loss" : "") + " layout '" + l.layout + "' dropout " +
                             std::to_string(l.dropout) + " rank " + std::to_string(test::world_rank());
    test::expect_matches(ref, got, cfg, what);
    if (test::world_rank() == 0 || test::world_rank() == world_size() - 1)
        std::printf("[%s] pipeline wait (bubble + transfers) %.1f ms, compute %.1f ms over %zu iterations\n",
                    what.c_str(), got.wait_seconds * 1e3, got.compute_seconds * 1e3,
                    got.records.size());
}

TEST(PipelineParallel, OneFOneBOnTwoStagesMatchesOneRank) {
    if (world_size() != 2) GTEST_SKIP() << "needs 2 ranks (registered as .np2)";
    expect_matches_one_rank({1, 2, 0});
}

TEST(PipelineParallel, InterleavedTwoStagesTwoChunksMatchesOneRank) {
    if (world_size() != 2) GTEST_SKIP() << "needs 2 ranks (registered as .np2)";
    expect_matches_one_rank({1, 2, 1, 0.1});
}

TEST(PipelineParallel, TensorAndPipelineParallelMatchesOneRank) {
    if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks (registered as .np4)";
    expect_matches_one_rank({2, 2, 0});
}

TEST(PipelineParallel, PipelineAndDataParallelMatchesOneRank) {
    if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks (registered as .np4)";
    expect_matches_one_rank({1, 2, 0, 0.1});
}

TEST(PipelineParallel, InterleavedWithDataParallelMatchesOneRank) {
    if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks (registered as .np4)";
    Layout l{1, 2, 1};
    // DP 2 leaves 2 micro-batches per replica (a multiple of PP, as the schedule needs):
    // with m == p the last stage runs every forward before any backward, so its heads'
    // logits must be recomputed (GptModel::backward).
    expect_matches_one_rank(l);
}

// Megatron's uneven stages: layers 0 | 1-3, each stage's layers at their global indices
// (the checkpoint names, the init's seeds, the dropout streams).
TEST(PipelineParallel, UnevenStagesMatchOneRank) {
    if (world_size() != 2) GTEST_SKIP() << "needs 2 ranks (registered as .np2)";
    expect_matches_one_rank({1, 2, 0, 0.1, 0, {1, PipelineSplit::kNotGiven}});
}

// Interleaved and uneven: 6 layers as stages {2, 4}, chunks {1, 2 | 1, 2} in virtual-stage
// order (layers 0 | 1-2 | 3 | 4-5).
TEST(PipelineParallel, InterleavedUnevenStagesMatchOneRank) {
    if (world_size() != 2) GTEST_SKIP() << "needs 2 ranks (registered as .np2)";
    expect_matches_one_rank({1, 2, 0, 0.0, 6, {2, 4}, 2});
}

// The embedding and the loss counted as layers over 4 stages of 2 layers: the first stage
// runs the embedding alone and the last the final norm and loss alone (chunks of no layers).
TEST(PipelineParallel, EmbeddingAndLossStagesWithoutLayersMatchOneRank) {
    if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks (registered as .np4)";
    expect_matches_one_rank({1, 4, 0, 0.1, 2, {PipelineSplit::kNotGiven, PipelineSplit::kNotGiven, true, true}});
}

// Megatron's --pipeline-model-parallel-layout: 6 layers as virtual stages {0, 3 | 2, 1}
// (layers 0-2 | 3-4 | 5): an interleaved first chunk of the embedding alone; VP = 4 / PP.
TEST(PipelineParallel, LayoutStringStagesMatchOneRank) {
    if (world_size() != 2) GTEST_SKIP() << "needs 2 ranks (registered as .np2)";
    const Layout l{1, 2, 0, 0.1, 6, {}, 0, "E|ttt|tt|tL"};
    expect_matches_one_rank(l);
    // Any split matches one rank: the chunks themselves say the layout was followed.
    dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 2);
    const Config cfg = pipeline_config(l);
    ASSERT_EQ(pipeline_num_chunks(cfg, groups), 2);
    const bool first = groups.coords().pp == 0;
    const std::vector<std::pair<int, int>> want = first ? std::vector<std::pair<int, int>>{{0, 0}, {3, 2}}
                                                        : std::vector<std::pair<int, int>>{{0, 3}, {5, 1}};
    for (int c = 0; c < 2; ++c) {
        const model::ChunkSpec spec = pipeline_chunk_spec(cfg, groups, c);
        EXPECT_EQ(std::pair(spec.first_layer, spec.num_layers), want[static_cast<std::size_t>(c)]) << "chunk " << c;
        EXPECT_EQ(spec.pre_process, first && c == 0);
        EXPECT_EQ(spec.post_process, !first && c == 1);
    }
}

TEST(PipelineParallel, LayersThatDoNotSplitEvenlyAreAUsageError) {
    if (world_size() != 2) GTEST_SKIP() << "needs 2 ranks (registered as .np2)";
    dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 2);
    auto be = make_backend("cpu", 0);
    Config cfg = pipeline_config({1, 2, 0});
    cfg.model.num_layers = 3;
    try {
        Trainer tr(cfg, groups, *be);
        FAIL() << "expected UsageError";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("not divisible by pipeline-model-parallel-size 2"),
                  std::string::npos) << e.what();
    }
    cfg = pipeline_config({1, 2, 1});
    cfg.model.num_layers = 6;  // 3 layers per stage, 2 per virtual stage
    cfg.parallel.num_layers_per_virtual_pipeline_stage = 2;
    EXPECT_THROW(Trainer(cfg, groups, *be), UsageError);
}

}  // namespace
}  // namespace gpt::train
