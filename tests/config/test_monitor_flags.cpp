// The monitoring flags: Megatron's names and defaults parse into MonitorConfig, and every
// bad value is rejected naming the flag.
#include <gtest/gtest.h>

#include "config/options.hpp"
#include "config/validate.hpp"
#include "core/errors.hpp"

using namespace gpt;

namespace {

std::string rejection(std::vector<std::string> extra) {
    std::vector<std::string> args{"--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
                                  "--seq-length", "32", "--vocab-size", "100", "--train-iters", "10"};
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

TEST(MonitorFlags, MegatronsNamesAndDefaults) {
    const MonitorConfig d = parse_args(std::vector<std::string>{}).config.monitor;
    EXPECT_EQ(d.timing_log_level, 0);
    EXPECT_EQ(d.timing_log_option, "minmax");
    EXPECT_TRUE(d.check_for_nan_in_loss_and_grad());
    EXPECT_FALSE(d.check_for_spiky_loss);
    EXPECT_FALSE(d.log_straggler);
    EXPECT_EQ(d.profile_step_start, 10);
    EXPECT_EQ(d.profile_step_end, 12);
    const MonitorConfig m =
        parse_args({"--timing-log-level", "2", "--timing-log-option", "all", "--log-straggler", "--profile",
                    "--profile-step-start", "3", "--profile-step-end", "5", "--no-check-for-nan-in-loss-and-grad",
                    "--check-for-spiky-loss", "--spiky-loss-window", "20", "--spiky-loss-zscore", "4.5",
                    "--spiky-loss-max-consecutive", "2"})
            .config.monitor;
    EXPECT_EQ(m.timing_log_level, 2);
    EXPECT_EQ(m.timing_log_option, "all");
    EXPECT_TRUE(m.log_straggler);
    EXPECT_TRUE(m.profile);
    EXPECT_EQ(m.profile_step_start, 3);
    EXPECT_EQ(m.profile_step_end, 5);
    EXPECT_FALSE(m.check_for_nan_in_loss_and_grad());
    EXPECT_TRUE(m.check_for_spiky_loss);
    EXPECT_EQ(m.spiky_loss_window, 20);
    EXPECT_EQ(m.spiky_loss_zscore, 4.5);
    EXPECT_EQ(m.spiky_loss_max_consecutive, 2);
}

TEST(MonitorFlags, BadValuesAreRejectedNamingTheFlag) {
    EXPECT_EQ(rejection({"--timing-log-level", "2", "--timing-log-option", "max"}), "");
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--timing-log-level", "3"}, "--timing-log-level must be 0, 1 or 2"},
        {{"--timing-log-level", "-1"}, "--timing-log-level must be 0, 1 or 2"},
        {{"--timing-log-option", "mean"}, "--timing-log-option must be minmax, max or all"},
        {{"--profile", "--profile-step-start", "5", "--profile-step-end", "5"}, "--profile-step-start 5 must be"},
        {{"--spiky-loss-window", "2"}, "--spiky-loss-window must be at least 3"},
        {{"--spiky-loss-zscore", "0"}, "--spiky-loss-zscore must be a positive number"},
        {{"--spiky-loss-zscore", "nan"}, "--spiky-loss-zscore must be a positive number"},
        {{"--spiky-loss-max-consecutive", "0"}, "--spiky-loss-max-consecutive must be at least 1"},
    };
    for (const auto& [args, want] : cases)
        EXPECT_NE(rejection(args).find(want), std::string::npos) << args.front() << ": " << rejection(args);
}
