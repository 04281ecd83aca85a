// The TensorBoard flags, per-split data paths and --skip-train: parsed into Config, and each
// bad combination rejected with one message naming the flags.
#include <gtest/gtest.h>

#include "config/options.hpp"
#include "config/validate.hpp"
#include "core/errors.hpp"

using namespace gpt;

namespace {

std::vector<std::string> base() {
    return {"--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
            "--seq-length", "32", "--vocab-size", "100", "--train-iters", "10"};
}

std::string error_of(std::vector<std::string> extra) {
    std::vector<std::string> args = base();
    args.insert(args.end(), extra.begin(), extra.end());
    try {
        Config cfg = parse_args(args).config;
        validate(cfg, 1);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(EvalFlags, TensorboardFlagsParse) {
    std::vector<std::string> args = base();
    for (const char* a : {"--tensorboard-dir", "tb", "--tensorboard-log-interval", "5", "--tensorboard-queue-size", "10",
                          "--log-timers-to-tensorboard", "--log-validation-ppl-to-tensorboard",
                          "--log-memory-to-tensorboard", "--log-world-size-to-tensorboard",
                          "--no-log-loss-scale-to-tensorboard", "--no-log-learning-rate-to-tensorboard"})
        args.push_back(a);
    const LoggingConfig l = parse_args(args).config.logging;
    EXPECT_EQ(l.tensorboard_dir, "tb");
    EXPECT_EQ(l.tensorboard_log_interval, 5);
    EXPECT_EQ(l.tensorboard_queue_size, 10);
    EXPECT_TRUE(l.log_timers_to_tensorboard && l.log_validation_ppl_to_tensorboard &&
                l.log_memory_to_tensorboard && l.log_world_size_to_tensorboard &&
                l.no_log_loss_scale_to_tensorboard && l.no_log_learning_rate_to_tensorboard);
    const LoggingConfig d = parse_args(base()).config.logging;  // Megatron's defaults
    EXPECT_EQ(d.tensorboard_log_interval, 1);
    EXPECT_EQ(d.tensorboard_queue_size, 1000);
    EXPECT_EQ(error_of({"--tensorboard-log-interval", "0"}), "--tensorboard-log-interval must be positive, got 0");
}

TEST(EvalFlags, PerSplitPathsParseBlends) {
    std::vector<std::string> args = base();
    for (const char* a : {"--train-data-path", "0.3", "a", "0.7", "b", "--valid-data-path", "v", "--test-data-path", "t"})
        args.push_back(a);
    Config cfg = parse_args(args).config;
    EXPECT_EQ(cfg.data.train_data_path, (std::vector<std::string>{"0.3", "a", "0.7", "b"}));
    EXPECT_EQ(cfg.data.valid_data_path, std::vector<std::string>{"v"});
    EXPECT_TRUE(cfg.data.per_split());
    EXPECT_NO_THROW(validate(cfg, 1));
}

TEST(EvalFlags, BadCombinationsAreOneClearError) {
    struct Case {
        std::vector<std::string> extra;
        std::string expect;
    };
    const std::vector<Case> cases{
        {{"--data-path", "x", "--train-data-path", "y"}, "--data-path and --train-data-path/--valid-data-path/--test-data-path are exclusive"},
        {{"--train-data-path", "y", "--split", "90,10,0"}, "--split applies to --data-path only"},
        {{"--valid-data-path", "v"}, "without --train-data-path"},
        {{"--train-data-path", "0.5", "a", "b"}, "--train-data-path with several datasets must alternate weight and prefix"},
        {{"--train-data-path", "t", "--valid-data-path", "-1", "a", "1", "b"}, "--valid-data-path weight '-1'"},
        {{"--multiple-validation-sets", "--train-data-path", "t"}, "--multiple-validation-sets needs --valid-data-path"},
        {{"--multiple-validation-sets", "--train-data-path", "t", "--valid-data-path", "1", "a", "1", "b"}, "without weights"},
        {{"--skip-train", "--eval-iters", "0"}, "--skip-train evaluates only, but --eval-iters is 0"},
        {{"--train-data-path", "a", "0.5"}, "weight '0.5' among prefixes without weights"},
    };
    for (const auto& c : cases) {
        const std::string m = error_of(c.extra);
        EXPECT_NE(m.find(c.expect), std::string::npos) << "case '" << c.expect << "' got: '" << m << "'";
    }
    // Valid forms.
    EXPECT_EQ(error_of({"--valid-data-path", "v", "--skip-train"}), "");
    EXPECT_EQ(error_of({"--train-data-path", "t", "--multiple-validation-sets", "--valid-data-path", "a", "b"}), "");
}
