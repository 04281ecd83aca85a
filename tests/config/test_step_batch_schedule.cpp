// --step-batch-size-schedule against the numbers of Megatron-LM's own
// StepBatchsizeNumMicroBatchesCalculator and update_train_iters (commit d98e8a64dd, run with
// /usr/bin/python3: the values came over, the code did not), and its refusals.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "config/batch_rampup.hpp"
#include "config/step_batch_schedule.hpp"
#include "config_test_util.hpp"

namespace gpt {
namespace {

Config schedule(const std::string& text, int seq_length, std::int64_t train_samples) {
    Config c;
    c.model.seq_length = seq_length;
    c.training.step_batch_size_schedule = text;
    c.training.train_samples = train_samples;
    return c;
}

std::vector<std::pair<std::int64_t, std::int64_t>> steps_of(const std::string& text, int seq_length) {
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    for (const BatchStep& s : parse_step_batch_schedule(text, seq_length)) out.emplace_back(s.first_sample, s.batch);
    return out;
}

TEST(StepBatchSchedule, FollowsMegatronsCalculator) {
    using Steps = std::vector<std::pair<std::int64_t, std::int64_t>>;
    struct Case {
        std::string text;
        int seq_length;
        Steps steps;                                                // Megatron's parsed schedule, in samples
        std::vector<std::pair<std::int64_t, std::int64_t>> at;     // consumed samples -> global batch
        std::int64_t train_samples, iterations, samples;
    };
    const std::vector<Case> cases{
        // examples/gpt3/train_gpt3_175b_distributed.sh: token thresholds with real values.
        {"0:16 2.4B:320 4.8B:624 7.2B:928 9.6B:1232 12B:1536", 2048,
         {{0, 16}, {1171875, 320}, {2343750, 624}, {3515625, 928}, {4687500, 1232}, {5859375, 1536}},
         {{0, 16}, {1171874, 16}, {1171875, 320}, {1171876, 320}, {2343750, 624}, {5859375, 1536}, {100000000, 1536}},
         146484375, 172551, 146485024},
        // One token per sample: thresholds as samples; the last iteration overshoots 500.
        {"0:4 100:8 250:12", 1, {{0, 4}, {100, 8}, {250, 12}},
         {{0, 4}, {99, 4}, {100, 8}, {101, 8}, {249, 8}, {250, 12}}, 500, 65, 504},
        // Commas, the K suffix with a fraction, and thresholds floored to samples.
        {"0:2 1.5K:4, 4K:6", 256, {{0, 2}, {5, 4}, {15, 6}}, {{0, 2}, {5, 4}, {6, 4}, {15, 6}, {16, 6}}, 40, 10, 42},
        // Out of order (Megatron sorts), B and T.
        {"250B:1536 0:768 0.5T:3072", 4096, {{0, 768}, {61035156, 1536}, {122070312, 3072}},
         {{0, 768}, {61035155, 768}, {61035156, 1536}, {61035157, 1536}}, 1000000000, 404995, 1000002816},
    };
    for (const Case& c : cases) {
        EXPECT_EQ(steps_of(c.text, c.seq_length), c.steps) << c.text;
        const BatchRampup r(schedule(c.text, c.seq_length, c.train_samples));
        ASSERT_TRUE(r.on());
        EXPECT_EQ(r.final_batch(), c.steps.back().second);
        for (const auto& [consumed, batch] : c.at)
            EXPECT_EQ(r.global_batch_at(consumed), batch) << c.text << " after " << consumed << " samples";
        EXPECT_EQ(r.run_length().iterations, c.iterations) << c.text;
        EXPECT_EQ(r.run_length().samples, c.samples) << c.text;
    }
    // Megatron's batch sizes, iteration by iteration.
    const BatchRampup r(schedule("0:2 1.5K:4, 4K:6", 256, 40));
    const std::vector<std::int64_t> want{2, 2, 2, 4, 4, 4, 6, 6, 6, 6};
    std::vector<std::int64_t> got;
    for (std::int64_t consumed = 0; got.size() < want.size(); consumed += got.back())
        got.push_back(r.global_batch_at(consumed));
    EXPECT_EQ(got, want);
    EXPECT_EQ(r.batch_sizes(), (std::vector<std::int64_t>{2, 4, 6}));
    // A run that ends before a step never takes its batch.
    EXPECT_EQ(BatchRampup(schedule("0:2 1.5K:4, 4K:6", 256, 12)).batch_sizes(), (std::vector<std::int64_t>{2, 4}));
}

TEST(StepBatchSchedule, RefusesWhatMegatronRefuses) {
    // Megatron (seq-length 1024): "1:16" is 0 samples, a valid start; "100:-3" is 0 samples
    // too, so the thresholds do not increase before the batch is read.
    EXPECT_EQ(steps_of("1:16", 1024), (std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 16}}));
    const std::vector<std::pair<std::string, std::string>> bad{
        {"", "--step-batch-size-schedule has no entry"},
        {" , ", "--step-batch-size-schedule has no entry"},
        {"16", "--step-batch-size-schedule: invalid entry \"16\"; expected THRESHOLD:BATCH_SIZE"},
        {"0:16 0:32", "--step-batch-size-schedule: the thresholds must be strictly increasing in samples (tokens / "
                      "seq-length 1024), got 0 before 0"},
        {"0:16 1000:32 1001:64", "--step-batch-size-schedule: the thresholds must be strictly increasing in samples"},
        {"0:16 x:3", "--step-batch-size-schedule: cannot read the number 'x' in the entry \"x:3\""},
        {"0:16 5K:y", "--step-batch-size-schedule: cannot read the number 'y'"},
        {"0:16 5K:nan", "--step-batch-size-schedule: cannot read the number 'nan'"},
        {"0:0", "--step-batch-size-schedule: batch sizes must be positive, got 0"},
        {"0:16 100:-3", "--step-batch-size-schedule: the thresholds must be strictly increasing"},
        {"2048:16", "--step-batch-size-schedule: the first threshold must be 0 (the batch to start with), got 2 samples"},
        {"0:16 -5K:32", "--step-batch-size-schedule: the threshold in \"-5K:32\" is negative"},
    };
    for (const auto& [text, message] : bad) {
        std::string got;
        try {
            parse_step_batch_schedule(text, 1024);
        } catch (const UsageError& e) {
            got = e.what();
        }
        EXPECT_EQ(got.find(message), 0u) << "'" << text << "': " << got;
    }
}

TEST(StepBatchSchedule, RefusesWhatItCannotRunAndLayoutsThatCannotSplitABatch) {
    // tiny::cli has --seq-length 32: "32:8" is sample 1.
    const std::vector<std::string> by_samples{"--train-iters", "0", "--train-samples", "300"};
    auto with = [&](std::vector<std::string> extra) {
        extra.insert(extra.begin(), by_samples.begin(), by_samples.end());
        return extra;
    };
    EXPECT_EQ(test::rejection(with({"--step-batch-size-schedule", "0:4 3.2K:8 6.4K:16"})), "");
    // Megatron's own GPT-3 example also gives the last batch as --global-batch-size: taken.
    EXPECT_EQ(test::rejection(with({"--step-batch-size-schedule", "0:4 3.2K:8", "--global-batch-size", "8"})), "");
    const std::vector<std::pair<std::vector<std::string>, std::string>> bad{
        {{"--step-batch-size-schedule", "0:4 3.2K:8"},
         "--step-batch-size-schedule needs sample-based training: give --train-samples, not --train-iters"},
        {with({"--step-batch-size-schedule", "0:4 3.2K:8", "--global-batch-size", "16"}),
         "--global-batch-size 16 disagrees with --step-batch-size-schedule, whose last batch is 8"},
        {with({"--step-batch-size-schedule", "0:8 3.2K:4"}),
         "--step-batch-size-schedule: the batch 4 from sample 100 is smaller than the 8 before it"},
        {with({"--step-batch-size-schedule", "0:4", "--global-batch-size", "8", "--rampup-batch-size", "4", "2", "100"}),
         "--rampup-batch-size and --step-batch-size-schedule both set the global batch's schedule; give one"},
        {with({"--step-batch-size-schedule", "0:4 3.2K:9"}),
         "global-batch-size 9 is not divisible by micro-batch-size x DP = 1 x 2 = 2"},
        {with({"--step-batch-size-schedule", "0:3 3.2K:8"}),
         "--step-batch-size-schedule: the global batch 3 (from sample 0) is not divisible by micro-batch-size x DP = 1 x 2 = 2"},
    };
    for (const auto& [args, message] : bad) EXPECT_EQ(test::rejection(args, 2).find(message), 0u) << test::rejection(args, 2);
    // The interleaved schedule over 2 stages needs an even number of micro-batches: 6 / 2 = 3.
    EXPECT_EQ(test::rejection(with({"--step-batch-size-schedule", "0:4 1K:6 2K:8", "--pipeline-model-parallel-size", "2",
                                    "--num-layers-per-virtual-pipeline-stage", "1"}),
                              4)
                  .find("the interleaved schedule needs the 3 micro-batches per iteration (--step-batch-size-schedule: "
                        "the global batch 6 (from sample 32)"),
              0u);
    // A run that may resume (--load) is checked by the trainer from where it resumes: a run
    // scaled up to DP 4 past its first batch of 2 goes on.
    EXPECT_EQ(test::rejection(with({"--step-batch-size-schedule", "0:2 1K:8", "--load", "/nonexistent"}), 4), "");
    Config c = schedule("0:2 1K:8", 32, 300);
    const BatchRampup r(c);
    EXPECT_NO_THROW(r.check_layout(1, 4, 1, 31));
    try {
        r.check_layout(1, 4, 1, 30);
        ADD_FAILURE() << "the batch of 2 at sample 30 splits over DP 4";
    } catch (const UsageError& e) {
        EXPECT_EQ(std::string(e.what()).find("--step-batch-size-schedule: the global batch 2 (from sample 30)"), 0u)
            << e.what();
    }
}

TEST(StepBatchSchedule, TheArgumentsTablePrintsTheString) {
    Config cfg = parse_args({"--step-batch-size-schedule", "0:16 2.4B:320"}).config;
    EXPECT_EQ(test::printed(cfg, "step_batch_size_schedule"), "0:16 2.4B:320");
    EXPECT_EQ(test::printed(parse_args({}).config, "step_batch_size_schedule"), "None");
}

}  // namespace
}  // namespace gpt
