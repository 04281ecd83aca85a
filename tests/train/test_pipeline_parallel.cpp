// Pipeline parallelism in the trainer: 1F1B and interleaved schedules, alone and combined
// with tensor and data parallelism, must train exactly like one rank: the same lm loss and
// grad norm every iteration, the same final parameters (the last stage's copy of the tied
// word embeddings included), and the same evaluation loss.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "train/trainer.hpp"
#include "trainer_test_util.hpp"

namespace gpt::train {
namespace {

struct Layout {
    int tp = 1, pp = 1, per_virtual = 0;  // per_virtual: layers per virtual stage (0: 1F1B)
    // Dropout follows the global micro-batch (not the stage or chunk), so runs with it on
    // must match too.
    double dropout = 0.0;
};

Config pipeline_config(const Layout& l) {
    Config c = test::tiny_train_config();
    c.model.num_layers = 4;  // 2 stages x 2 virtual stages x 1 layer
    c.training.micro_batch_size = 1;
    c.training.global_batch_size = 4;  // 4 micro-batches on one replica, 2 with DP 2
    c.training.train_iters = 6;
    c.parallel.tensor_model_parallel_size = l.tp;
    c.parallel.pipeline_model_parallel_size = l.pp;
    c.parallel.num_layers_per_virtual_pipeline_stage = l.per_virtual;
    c.model.hidden_dropout = l.dropout;
    c.model.attention_dropout = l.dropout;
    return c;
}

struct Run {
    std::vector<IterationRecord> records;
    double eval_loss = 0.0;
    // Every parameter this rank holds, by Megatron name, as (slice start, split dim, values).
    struct Param {
        std::int64_t slice_start;
        int split_dim;
        std::vector<std::int64_t> local_shape;
        std::vector<float> values;
    };
    std::map<std::string, Param> params;
    double wait_seconds = 0.0, compute_seconds = 0.0;
};

void collect(model::GptModel& m, Run& run) {
    std::vector<float> all(static_cast<std::size_t>(m.layout().total_elements()));
    m.get_parameters(all.data());
    for (const auto& e : m.layout().entries())
        run.params[e.name] = Run::Param{e.slice_start, e.split_dim, e.local_shape,
                                        std::vector<float>(all.begin() + e.offset,
                                                           all.begin() + e.offset + e.numel)};
}

Run train(const Config& cfg, MPI_Comm comm, int tp, int pp) {
    dist::ProcessGroups groups(comm, tp, pp);
    auto be = make_backend("cpu", 0);
    Trainer tr(cfg, groups, *be);
    const int dp = groups.grid().dp_size();
    test::WalkSource src(static_cast<int>(cfg.model.vocab_size), cfg.model.seq_length,
                         cfg.training.micro_batch_size, groups.coords().dp, dp);
    Run run;
    for (std::int64_t i = 0; i < tr.train_iters(); ++i) {
        tr.train_step(src);
        if (tr.pipeline()) {
            run.wait_seconds += tr.pipeline()->last_timing().wait_seconds;
            run.compute_seconds += tr.pipeline()->last_timing().compute_seconds;
        }
    }
    run.records = tr.history();
    test::WalkSource valid(static_cast<int>(cfg.model.vocab_size), cfg.model.seq_length,
                           cfg.training.micro_batch_size, groups.coords().dp, dp, 1000);
    run.eval_loss = tr.evaluate(valid, 2);
    if (tr.pipeline()) {
        for (int c = 0; c < tr.pipeline()->num_chunks(); ++c) collect(tr.pipeline()->chunk(c), run);
    } else {
        collect(tr.model(), run);
    }
    return run;
}

// The reference slice of a global tensor the rank holds: split_dim 0 rows or 1 columns.
std::vector<float> reference_slice(const Run::Param& full, const Run::Param& local) {
    if (local.split_dim < 0) return full.values;
    const std::int64_t cols = full.local_shape.size() > 1 ? full.local_shape[1] : 1;
    const std::int64_t rows = local.local_shape[0];
    const std::int64_t lcols = local.local_shape.size() > 1 ? local.local_shape[1] : 1;
    std::vector<float> out;
    for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < lcols; ++j) {
            const std::int64_t r = local.split_dim == 0 ? local.slice_start + i : i;
            const std::int64_t c = local.split_dim == 1 ? local.slice_start + j : j;
            out.push_back(full.values[static_cast<std::size_t>(r * cols + c)]);
        }
    return out;
}

void expect_matches_one_rank(const Layout& l) {
    int world = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const Config cfg = pipeline_config(l);
    Config single = cfg;
    single.parallel = ParallelConfig{};
    const Run ref = train(single, MPI_COMM_SELF, 1, 1);
    const Run got = train(cfg, MPI_COMM_WORLD, l.tp, l.pp);
    const std::string what = "TP " + std::to_string(l.tp) + " PP " + std::to_string(l.pp) +
                             " DP " + std::to_string(world / (l.tp * l.pp)) + " layers/virtual " +
                             std::to_string(l.per_virtual) + " dropout " +
                             std::to_string(l.dropout) + " rank " + std::to_string(rank);
    ASSERT_EQ(got.records.size(), ref.records.size());
    for (std::size_t i = 0; i < ref.records.size(); ++i) {
        const auto &a = ref.records[i], &b = got.records[i];
        EXPECT_NEAR(b.lm_loss, a.lm_loss, 1e-5 * a.lm_loss) << what << " iteration " << i + 1;
        EXPECT_NEAR(b.grad_norm, a.grad_norm, 1e-5 * a.grad_norm) << what << " iteration " << i + 1;
    }
    EXPECT_LT(got.records.back().lm_loss, got.records.front().lm_loss) << what;
    EXPECT_NEAR(got.eval_loss, ref.eval_loss, 1e-5 * ref.eval_loss) << what;
    // This rank's parameters against the same slices of the one-rank model.
    ASSERT_FALSE(got.params.empty());
    const bool last_stage_copy = got.params.count(model::ParamLayout::word_embeddings_for_head()) > 0;
    for (const auto& [name, p] : got.params) {
        const std::string ref_name = name == model::ParamLayout::word_embeddings_for_head()
                                         ? std::string(model::ParamLayout::word_embeddings())
                                         : name;
        ASSERT_EQ(ref.params.count(ref_name), 1u) << what << " " << name;
        const std::vector<float> want = reference_slice(ref.params.at(ref_name), p);
        ASSERT_EQ(want.size(), p.values.size()) << what << " " << name;
        // The key bias has an exactly zero gradient (softmax ignores a shift shared by all
        // keys), so Adam turns round-off into ~1e-6 values that depend on summation order:
        // those elements only have to stay at noise level on both sides.
        const bool qkv_bias = name.find("query_key_value/bias") != std::string::npos;
        const int head_dim = cfg.model.hidden_size / cfg.model.num_attention_heads;
        double worst = 0.0, worst_key = 0.0;
        for (std::size_t i = 0; i < want.size(); ++i) {
            const double diff = std::abs(double(p.values[i]) - want[i]);
            const std::int64_t row = p.slice_start + static_cast<std::int64_t>(i);
            if (qkv_bias && row % (3 * head_dim) >= head_dim && row % (3 * head_dim) < 2 * head_dim)
                worst_key = std::max(worst_key, diff);
            else
                worst = std::max(worst, diff / std::max(std::abs(double(want[i])), 1e-2));
        }
        EXPECT_LT(worst, 1e-5) << what << " " << name;
        EXPECT_LT(worst_key, 5e-5) << what << " " << name << " (key bias, noise level)";
    }
    // Stages hold disjoint layers: over the pipeline every layer appears exactly once.
    int layers_here = 0;
    for (const auto& [name, p] : got.params)
        if (name.find("/input_layernorm/weight") != std::string::npos) ++layers_here;
    EXPECT_EQ(layers_here, cfg.model.num_layers / l.pp) << what;
    int copies = last_stage_copy ? 1 : 0, total = 0;
    MPI_Allreduce(&copies, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_EQ(total, world / l.pp) << "one head copy of the word embeddings per last stage";
    if (rank == 0 || rank == world - 1)
        std::printf("[%s] pipeline wait (bubble + transfers) %.1f ms, compute %.1f ms over %zu iterations\n",
                    what.c_str(), got.wait_seconds * 1e3, got.compute_seconds * 1e3,
                    got.records.size());
}

int world_size() {
    int world = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    return world;
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
        EXPECT_NE(std::string(e.what()).find("not divisible by --pipeline-model-parallel-size 2"),
                  std::string::npos) << e.what();
    }
    cfg = pipeline_config({1, 2, 1});
    cfg.model.num_layers = 6;  // 3 layers per stage, 2 per virtual stage
    cfg.parallel.num_layers_per_virtual_pipeline_stage = 2;
    EXPECT_THROW(Trainer(cfg, groups, *be), UsageError);
}

}  // namespace
}  // namespace gpt::train
