// The bytes each process group moves in one training iteration equal the analytical count
// of Megatron's PTD-P communication (Narayanan et al. 2021, Korthikanti et al. 2022), per
// rank, as the communicators count them: an all-reduce counts its buffer, an all-gather its
// whole output, a reduce-scatter its whole input, a send or receive its message.
//
// Model: L layers of hidden h on this rank's stage, T = s b tokens per micro-batch, m
// micro-batches per replica, e bytes per activation (fp32 here), V the padded vocabulary.
// TP group (t > 1), per micro-batch:
//   layer, no SP:   forward 2 all-reduces of T h e, backward 2                       = 4 T h e
//   layer, SP:      forward 2 all-gathers + 2 reduce-scatters of T h e; backward
//                   2 all-gathers of the row-parallel output grads, 2 re-gathers of the
//                   sharded LN outputs for the weight grads, 2 reduce-scatters          = 10 T h e
//   full recompute: the layer's forward communication once more in backward
//   embedding:      forward all-reduce T h e (+ SP: backward all-gather of the grad, T h e)
//   head:           3 all-reduces of T fp32 (max, exp-sum, target logit); backward
//                   all-reduce T h e (SP: forward all-gather + backward re-gather +
//                   reduce-scatter, 3 T h e)
//   SP, once per iteration: the layernorm and row-parallel-bias grads, 6 h fp32 per
//   layer and 2 h for the final layernorm.
// DP group (d > 1): all-reduce of the P-element fp32 grad buffer, or with the distributed
//   optimizer a reduce-scatter of it plus an all-gather of the P params (P padded to a
//   multiple of 64 d); the loss tally (sum and counted tokens), 16 bytes.
// PP group (p > 1, 1F1B): per micro-batch an activation out and a gradient back across
//   every stage boundary this stage touches: 2 messages of R h e per boundary (R = T, or
//   T/t with SP); the last stage's loss tally to all, 16 bytes.
// Embedding group (first + last stage): all-reduce of the word-embedding grads, V/t h fp32.
// Grad norm: 3 doubles (sum of squares, non-finite ranges, zeros) over the model-parallel
// group, or over the world when sharded.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <map>
#include <string>

#include "dist/rank_grid.hpp"
#include "parallel_match.hpp"
#include "trainer_test_util.hpp"

namespace gpt::train {
namespace {

struct Case {
    int tp, pp;
    bool sp = false, distopt = false, full_recompute = false;
};

Config bytes_config(const Case& k) {
    Config c = test::tiny::layers4(1);
    c.model.hidden_size = 128;  // every parameter a multiple of 64 elements: no padding
    c.optimizer.lr_warmup_iters = 0;
    c.parallel.tensor_model_parallel_size = k.tp;
    c.parallel.pipeline_model_parallel_size = k.pp;
    c.parallel.sequence_parallel = k.sp;
    c.parallel.use_distributed_optimizer = k.distopt;
    if (k.full_recompute) {
        c.parallel.recompute_granularity = RecomputeGranularity::Full;
        c.parallel.recompute_method = RecomputeMethod::Uniform;
        c.parallel.recompute_num_layers = 1;
    }
    return c;
}

std::map<std::string, double> expected_bytes(const Case& k, const Config& c, const test::Run& run) {
    const int world = test::world_size();
    const dist::RankGrid grid(world, k.tp, k.pp);
    const auto me = grid.coords(test::world_rank());
    const int t = k.tp, p = k.pp, d = world / (t * p);
    const bool first = me.pp == 0, last = me.pp == p - 1;
    const double T = double(c.model.seq_length) * c.training.micro_batch_size;
    const double h = c.model.hidden_size, e = 4.0;
    const double m = double(c.training.global_batch_size) / (c.training.micro_batch_size * d);
    const double layers = double(c.model.num_layers) / p;
    const double V = 64;  // 61 padded to a multiple of 16 t (t <= 4)
    const bool sp = k.sp && t > 1;
    std::map<std::string, double> x;

    double tp = 0;
    if (t > 1) {
        double per_mb = layers * (sp ? 10 : 4) * T * h * e;
        if (k.full_recompute) per_mb += layers * (sp ? 4 : 2) * T * h * e;
        if (first) per_mb += (sp ? 2 : 1) * T * h * e;
        if (last) per_mb += 3 * T * 4 + (sp ? 3 : 1) * T * h * e;
        tp = m * per_mb;
        if (sp) tp += (layers * 6 * h + (last ? 2 * h : 0)) * 4;
    }
    x["tp"] = tp;

    // This rank's parameters (the model's count), padded as the distributed optimizer pads.
    double params = 0;
    for (const auto& [name, prm] : run.params) params += double(prm.values.size());
    const double multiple = k.distopt ? 64.0 * d : 1.0;
    const double P = std::ceil(params / multiple) * multiple;
    x["dp"] = d > 1 ? (k.distopt ? P * 4 + P * e : P * 4) + 16 : 0;

    const double rows = sp ? T / t : T;
    const double boundaries = p > 1 ? (first || last ? 1 : 2) : 0;
    x["pp"] = p > 1 ? m * boundaries * 2 * rows * h * e + 16 : 0;
    x["embedding"] = p > 1 && (first || last) ? V / t * h * 4 : 0;
    const bool sharded = k.distopt && d > 1;
    x["model-parallel"] = !sharded && t * p > 1 ? 24 : 0;
    x["world"] = sharded ? 24 : 0;
    return x;
}

void check(const Case& k) {
    const Config cfg = bytes_config(k);
    const test::Run run = test::train_run(cfg, MPI_COMM_WORLD);
    const auto want = expected_bytes(k, cfg, run);
    const std::string what = "TP " + std::to_string(k.tp) + " PP " + std::to_string(k.pp) +
                             (k.sp ? " SP" : "") + (k.distopt ? " distopt" : "") +
                             (k.full_recompute ? " full-recompute" : "") + " rank " +
                             std::to_string(test::world_rank());
    for (const auto& [group, bytes] : want) {
        ASSERT_EQ(run.first_iteration_bytes.count(group), 1u) << what << ": no group " << group;
        EXPECT_EQ(double(run.first_iteration_bytes.at(group).total_bytes()), bytes)
            << what << ", group " << group;
    }
}

TEST(CommBytes, TwoRanks) {
    if (test::world_size() != 2) GTEST_SKIP() << "needs 2 ranks (registered as .np2)";
    check({2, 1});
    check({2, 1, true});
    check({2, 1, true, false, true});
    check({1, 2});
    check({1, 1});
    check({1, 1, false, true});
}

TEST(CommBytes, FourRanks) {
    if (test::world_size() != 4) GTEST_SKIP() << "needs 4 ranks (registered as .np4)";
    check({1, 4});
    check({2, 2, true});
    check({1, 2, false, true});
    check({2, 1, true, true});
}

TEST(CommBytes, EightRanks) {
    if (test::world_size() != 8) GTEST_SKIP() << "needs 8 ranks (registered as .np8)";
    check({2, 2});
    check({2, 2, true, true, true});
}

}  // namespace
}  // namespace gpt::train
