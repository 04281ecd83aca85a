// --rampup-batch-size against the numbers of Megatron-LM's own RampupBatchsizeNumMicroBatchesCalculator
// and update_train_iters (commit 532ad926b4^, the last with them; run with /usr/bin/python3: the
// values came over, the code did not), and its refusals.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "config/batch_rampup.hpp"
#include "config_test_util.hpp"

namespace gpt {
namespace {

Config ramp(int global, int start, int increment, int samples, std::int64_t train_samples) {
    Config c;
    c.training.global_batch_size = global;
    c.training.rampup_batch_size = {start, increment, samples};
    c.training.train_samples = train_samples;
    return c;
}

TEST(BatchRampup, FollowsMegatronsCalculator) {
    struct Case {
        Config t;
        std::vector<std::pair<std::int64_t, std::int64_t>> at;  // consumed samples -> global batch
        std::int64_t iterations;
    };
    const std::vector<Case> cases{
        // examples/gpt3/train_gpt3_175b_distributed.sh: 95 increments of 61677.6 samples.
        {ramp(1536, 16, 16, 5859375, 146484375),
         {{0, 16}, {1, 16}, {61677, 16}, {61678, 32}, {3000000, 784}, {5859374, 1520}, {5859375, 1536},
          {5859376, 1536}, {100000000, 1536}},
         111354},
        {ramp(16, 4, 2, 100, 300),
         {{0, 4}, {14, 4}, {21, 6}, {28, 6}, {35, 8}, {49, 8}, {56, 10}, {70, 12}, {84, 14}, {98, 14}, {105, 16}},
         26},
        // 4 increments of 12.5 samples: the real-number division decides 12 -> 3, 13 -> 8.
        {ramp(23, 3, 5, 50, 200), {{0, 3}, {12, 3}, {13, 8}, {25, 13}, {37, 13}, {38, 18}, {49, 18}, {50, 23}, {51, 23}}, 15},
    };
    for (const Case& c : cases) {
        const BatchRampup r(c.t);
        ASSERT_TRUE(r.on());
        for (const auto& [consumed, batch] : c.at)
            EXPECT_EQ(r.global_batch_at(consumed), batch) << "after " << consumed << " samples, " << r.describe();
        EXPECT_EQ(r.run_length().iterations, c.iterations) << r.describe();
    }
    // Megatron's batch sizes, iteration by iteration, and the samples they consume: the ramp
    // overshoots --train-samples 300 by none here; the partial last final batch is dropped.
    const Config t = ramp(16, 4, 2, 100, 300);
    const BatchRampup r(t);
    const std::vector<std::int64_t> want{4, 4, 4, 4, 4, 6, 6, 6, 8, 8, 10, 10, 12, 14, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16};
    std::vector<std::int64_t> got;
    std::int64_t consumed = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        got.push_back(r.global_batch_at(consumed));
        consumed += got.back();
    }
    EXPECT_EQ(got, want);
    EXPECT_EQ(r.run_length().samples, 292);
    EXPECT_EQ(BatchRampup(ramp(23, 3, 5, 50, 200)).run_length().samples, 200);

    Config constant;
    constant.training.global_batch_size = 8;
    constant.training.train_samples = 100;
    EXPECT_FALSE(BatchRampup(constant).on());
    EXPECT_EQ(BatchRampup(constant).global_batch_at(50), 8);
    EXPECT_EQ(BatchRampup(constant).run_length().iterations, 12);
    EXPECT_EQ(BatchRampup(constant).run_length().samples, 96);
}

TEST(BatchRampup, RefusesWhatMegatronAssertsAndLayoutsThatCannotSplitARampBatch) {
    const std::vector<std::string> by_samples{"--train-iters", "0", "--train-samples", "300"};
    auto with = [&](std::vector<std::string> extra) {
        extra.insert(extra.begin(), by_samples.begin(), by_samples.end());
        return extra;
    };
    EXPECT_EQ(test::rejection(with({"--global-batch-size", "16", "--rampup-batch-size", "4", "2", "100"})), "");
    const std::vector<std::pair<std::vector<std::string>, std::string>> bad{
        {{"--global-batch-size", "16", "--rampup-batch-size", "4", "2", "100", "--train-iters", "10"},
         "--rampup-batch-size needs sample-based training: give --train-samples, not --train-iters"},
        {with({"--global-batch-size", "16", "--rampup-batch-size", "4", "2"}), "--rampup-batch-size takes 3 values"},
        {with({"--global-batch-size", "16", "--rampup-batch-size", "4", "0", "100"}),
         "--rampup-batch-size 4 0 100: the start batch size, the increment and the ramp-up samples must be positive"},
        {with({"--global-batch-size", "16", "--rampup-batch-size", "16", "2", "100"}),
         "--rampup-batch-size starts at 16, which is not below --global-batch-size 16"},
        {with({"--global-batch-size", "16", "--rampup-batch-size", "4", "5", "100"}),
         "--rampup-batch-size: global-batch-size 16 - start 4 = 12 is not divisible by the increment 5"},
    };
    for (const auto& [args, message] : bad) EXPECT_EQ(test::rejection(args).find(message), 0u) << test::rejection(args);
    // DP 2: the ramp 2, 9, 16 (two increments of 50 samples) cannot split its 9 over two
    // replicas, though the start and the final batch split.
    EXPECT_EQ(test::rejection(with({"--global-batch-size", "16", "--rampup-batch-size", "2", "7", "100"}), 2)
                  .find("--rampup-batch-size: the global batch 9 (from sample 50) is not divisible by micro-batch-size x DP = 1 x 2 = 2"),
              0u);
    // The interleaved schedule over 2 stages needs an even number of micro-batches: the ramp
    // 2, 5, 8 has 5 in its middle.
    EXPECT_EQ(test::rejection(with({"--global-batch-size", "8", "--rampup-batch-size", "2", "3", "100",
                                    "--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1"}),
                              2)
                  .find("the interleaved schedule needs the 5 micro-batches per iteration (--rampup-batch-size: the global batch 5 (from sample 50)"),
              0u);
}

TEST(BatchRampup, TheArgumentsTablePrintsMegatronsList) {
    Config cfg = parse_args({"--rampup-batch-size", "16", "16", "5859375"}).config;
    EXPECT_EQ(test::printed(cfg, "rampup_batch_size"), "[16, 16, 5859375]");
    EXPECT_EQ(test::printed(parse_args({}).config, "rampup_batch_size"), "None");
}

}  // namespace
}  // namespace gpt
