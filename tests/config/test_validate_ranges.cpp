// Issue 20 section 4: every value is checked at start-up, one clear message each, instead
// of an internal error, NaN or a silently disabled feature later.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "config/options.hpp"
#include "config/validate.hpp"
#include "config_test_util.hpp"
#include "core/errors.hpp"
#include "test_env.hpp"

using namespace gpt;
using gpt::test::rejection;
namespace tiny = gpt::test::tiny;

namespace {

}  // namespace

TEST(ValidateRanges, EveryClassOfBadValueIsRejectedNamingTheFlag) {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--global-batch-size", "-8"}, "--global-batch-size must not be negative"},
        {{"--max-global-batch-size", "-1"}, "--max-global-batch-size must not be negative"},
        {{"--layernorm-epsilon", "-1"}, "--layernorm-epsilon must be positive"},
        {{"--layernorm-epsilon", "0"}, "--layernorm-epsilon must be positive"},
        {{"--layernorm-epsilon", "nan"}, "--layernorm-epsilon must be a finite number"},
        {{"--save-interval", "-5"}, "--save-interval must not be negative"},
        {{"--log-interval", "-1"}, "--log-interval must be positive"},
        {{"--eval-interval", "-1"}, "--eval-interval must be positive"},
        {{"--exit-interval", "-3"}, "--exit-interval must not be negative"},
        {{"--exit-duration-in-mins", "-1"}, "--exit-duration-in-mins must not be negative"},
        {{"--ckpt-step", "-7"}, "--ckpt-step must be an iteration"},
        {{"--keep-last", "-1"}, "--keep-last must not be negative"},
        {{"--log-progress"}, "--log-progress writes SAVE/progress.txt: it needs --save"},
        {{"--pipeline-model-parallel-layout", "Etq|L"}, "'q' is not a layer (E embedding, t decoder layer"},
        {{"--pipeline-model-parallel-layout", "Et|tL", "--num-virtual-stages-per-pipeline-rank", "2"},
         "--pipeline-model-parallel-layout gives the virtual stages itself"},
        {{"--pipeline-model-parallel-layout", "Et|tL"}, "has 2 stages but pipeline-model-parallel-size is 1"},
        {{"--ffn-hidden-size", "-64"}, "--ffn-hidden-size must not be negative"},
        {{"--max-position-embeddings", "-1"}, "--max-position-embeddings must not be negative"},
        {{"--lr-warmup-iters", "-2"}, "--lr-warmup-iters must not be negative"},
        {{"--lr-decay-iters", "-2"}, "--lr-decay-iters must not be negative"},
        {{"--lr-warmup-samples", "-2"}, "--lr-warmup-samples must not be negative"},
        {{"--lr-decay-samples", "-2"}, "--lr-decay-samples must not be negative"},
        {{"--lr", "inf"}, "--lr must be a finite number"},
        {{"--clip-grad", "inf"}, "--clip-grad must be a finite number"},
        {{"--loss-scale", "inf"}, "--loss-scale must be a finite number"},
        {{"--init-method-std", "inf"}, "--init-method-std must be a finite number"},
        {{"--recompute-num-layers", "-1"}, "--recompute-num-layers must not be negative"},
        {{"--num-layers-per-virtual-pipeline-stage", "-1"}, "must not be negative"},
        {{"--data-parallel-size", "-1"}, "--data-parallel-size must not be negative"},
        {{"--world-size", "-4"}, "--world-size must not be negative"},
        {{"--world-size", "10000000"}, "exceed the planner's bounds"},
        {{"--local-world-size", "100000"}, "exceed the planner's bounds"},
        {{"--plan-intra-node-gbps", "inf"}, "must be a finite number"},
        {{"--data-path", "1e308", "A", "1e308", "B"}, "--data-path weights sum to inf"},
        {{"--data-path", "0", "A", "0", "B"}, "--data-path weights sum to 0"},
    };
    for (const auto& [extra, want] : cases) {
        const std::string got = rejection(extra);
        EXPECT_NE(got.find(want), std::string::npos)
            << extra[0] << " " << extra[1] << ": want '" << want << "', got '" << got << "'";
    }
    EXPECT_EQ(rejection({}), "");
    EXPECT_EQ(rejection({"--ckpt-step", "-1", "--save-interval", "0", "--world-size", "4096"}), "");
}

// Megatron's non-persistent checkpoints: the global type only, and never a folder whose
// older checkpoints the keep-one rule would delete.
TEST(ValidateRanges, NonPersistentCheckpointFlags) {
    const std::string dir = test::scratch_dir("validate_non_persistent");
    const std::vector<std::string> global{"--non-persistent-ckpt-type", "global"};
    const auto with = [&](std::vector<std::string> extra, bool typed = true) {
        if (typed) extra.insert(extra.end(), global.begin(), global.end());
        return rejection(extra);
    };
    const std::vector<std::pair<std::string, std::string>> cases = {
        {with({"--save", dir, "--non-persistent-save-interval", "-1"}),
         "--non-persistent-save-interval must not be negative"},
        {with({"--non-persistent-ckpt-type", "local"}, false), "--non-persistent-ckpt-type local is not implemented"},
        {with({"--non-persistent-ckpt-type", "in_memory"}, false), "in_memory is not implemented"},
        {with({"--non-persistent-ckpt-type", "globl"}, false), "must be global (local and in_memory are not"},
        {with({"--save", dir, "--non-persistent-save-interval", "5"}, false),
         "--non-persistent-save-interval needs --non-persistent-ckpt-type global"},
        {with({"--non-persistent-save-interval", "5"}), "--non-persistent-save-interval needs --save"},
        {with({"--non-persistent-global-ckpt-dir", dir + "/np"}, false),
         "--non-persistent-global-ckpt-dir needs --non-persistent-ckpt-type global"},
        {with({"--save", dir, "--non-persistent-global-ckpt-dir", dir + "/."}), "is the --save folder"},
        {with({"--load", dir, "--non-persistent-global-ckpt-dir", dir}), "is the --load folder"},
    };
    for (const auto& [got, want] : cases)
        EXPECT_NE(got.find(want), std::string::npos) << "want '" << want << "', got '" << got << "'";
    EXPECT_EQ(with({"--save", dir, "--load", dir, "--non-persistent-save-interval", "5"}), "");
    EXPECT_EQ(with({"--save", dir, "--non-persistent-save-interval", "5", "--non-persistent-global-ckpt-dir",
                    dir + "/np"}),
              "");
    EXPECT_EQ(with({"--load", dir}), "");  // the type alone: the load looks there too
}

TEST(ValidateRanges, ConfigPointingAtAFolderIsRejected) {
    const std::string dir = test::scratch_dir("validate_config_dir");
    try {
        parse_args({"--config", dir});
        FAIL() << "a folder was read as a config file";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
    }
}

TEST(OutputPaths, MissingFoldersAreCreatedAndFilesInTheirPlaceRejected) {
    const std::string dir = test::scratch_dir("validate_outputs");
    Config cfg;
    cfg.checkpoint.save = dir + "/new/ckpt";
    cfg.logging.log_dir = dir + "/logs";
    cfg.logging.metrics_file = dir + "/metrics/m.jsonl";
    cfg.data.data_cache_path = dir + "/cache";
    check_output_paths(cfg, 1024, 0);
    for (const char* d : {"/new/ckpt", "/logs", "/metrics", "/cache"})
        EXPECT_TRUE(std::filesystem::is_directory(dir + d)) << d;
    // No probe file is left behind.
    EXPECT_TRUE(std::filesystem::is_empty(dir + "/new/ckpt"));

    std::ofstream(dir + "/a-file") << "x";
    for (int which = 0; which < 3; ++which) {
        Config bad;
        std::string* field = which == 0 ? &bad.checkpoint.save : which == 1 ? &bad.logging.log_dir : &bad.data.data_cache_path;
        *field = dir + "/a-file";
        try {
            check_output_paths(bad, 0, 0);
            ADD_FAILURE() << "a file in place of a folder passed (" << which << ")";
        } catch (const UsageError& e) {
            EXPECT_NE(std::string(e.what()).find("is a file, not a folder"), std::string::npos) << e.what();
        }
    }
    Config folder_as_metrics;
    folder_as_metrics.logging.metrics_file = dir + "/logs";
    EXPECT_THROW(check_output_paths(folder_as_metrics, 0, 0), UsageError);
}

TEST(OutputPaths, SaveNeedsRoomForOneCheckpoint) {
    const std::string dir = test::scratch_dir("validate_save_space");
    Config cfg;
    cfg.checkpoint.save = dir;
    check_output_paths(cfg, 1, 0);
    try {
        check_output_paths(cfg, std::uint64_t(1) << 62, 0);  // 4 EiB: more than any disk
        FAIL() << "a 4 EiB checkpoint fits?";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("one checkpoint of this model needs about"), std::string::npos) << e.what();
    }
}

// The Llama-style options (tiny: hidden 64, 4 heads of 16 dims): bad values and
// combinations, one message naming the flag; good combinations pass, and Megatron's
// derived defaults are applied.
TEST(ValidateRanges, DecoderOptionsAreCheckedNamingTheFlag) {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--position-embedding-type", "alibi"}, "--position-embedding-type must be one of learned_absolute, rope"},
        {{"--normalization", "rmsnorm"}, "--normalization must be one of LayerNorm, RMSNorm"},
        {{"--position-embedding-type", "rope", "--rotary-percent", "0"}, "--rotary-percent must be in (0, 1]"},
        {{"--position-embedding-type", "rope", "--rotary-percent", "1.5"}, "--rotary-percent must be in (0, 1]"},
        {{"--position-embedding-type", "rope", "--rotary-percent", "0.0625"}, "gives 1 rotary dims"},
        {{"--position-embedding-type", "rope", "--rotary-base", "0"}, "--rotary-base must be positive"},
        {{"--rotary-interleaved"}, "--rotary-interleaved needs --position-embedding-type rope"},
        {{"--group-query-attention", "--num-query-groups", "3"}, "--num-attention-heads 4 is not divisible by --num-query-groups 3"},
        {{"--group-query-attention", "--num-query-groups", "0"}, "--num-query-groups must be positive"},
        {{"--norm-epsilon", "-1"}, "--norm-epsilon must be positive"},
        {{"--norm-epsilon", "1e-6", "--layernorm-epsilon", "1e-4"}, "disagree"},
        {{"--squared-relu", "--swiglu"}, "--squared-relu and --swiglu are two different MLP activations; give one"},
        {{"--squared-relu", "--openai-gelu"}, "--squared-relu and --openai-gelu are two different MLP activations; give one"},
    };
    for (const auto& [extra, want] : cases) {
        const std::string got = rejection(extra);
        std::string flags;
        for (const auto& a : extra) flags += a + " ";
        EXPECT_NE(got.find(want), std::string::npos) << flags << ": want '" << want << "', got '" << got << "'";
    }
    EXPECT_EQ(rejection({"--position-embedding-type", "rope", "--rotary-percent", "0.5", "--rotary-interleaved",
                         "--normalization", "RMSNorm", "--norm-epsilon", "1e-6", "--swiglu",
                         "--group-query-attention", "--num-query-groups", "2",
                         "--untie-embeddings-and-output-weights", "--disable-bias-linear"}),
              "");
    // Megatron's fused bias-GELU flag is GELU's: with squared ReLU it has nothing to choose.
    EXPECT_EQ(rejection({"--squared-relu", "--no-bias-gelu-fusion", "--disable-bias-linear"}), "");
    auto args = tiny::cli();
    for (const char* a : {"--swiglu", "--norm-epsilon", "1e-6"}) args.push_back(a);
    Config cfg = parse_args(args).config;
    validate(cfg, 1);
    EXPECT_EQ(cfg.model.ffn_hidden_size, 128);  // Megatron: int(4h x 2/3 / 64) x 64 for h = 64
    EXPECT_EQ(cfg.model.layernorm_epsilon, 1e-6);
}

// Samples during training run lib/inference's GPT-2 layer: a Llama-style model is refused
// before training starts, naming the option.
TEST(ValidateRanges, SamplesRefuseLlamaStyleModels) {
    const std::vector<std::string> sample = {"--sample-interval", "2", "--vocab-file", "v.json", "--merge-file", "m.txt"};
    EXPECT_EQ(rejection(sample), "");
    for (const auto& [opt, name] : std::vector<std::pair<std::vector<std::string>, std::string>>{
             {{"--swiglu"}, "--swiglu"},
             {{"--normalization", "RMSNorm"}, "--normalization RMSNorm"},
             {{"--position-embedding-type", "rope"}, "--position-embedding-type rope"},
             {{"--group-query-attention", "--num-query-groups", "2"}, "--group-query-attention"},
             {{"--untie-embeddings-and-output-weights"}, "--untie-embeddings-and-output-weights"},
             {{"--disable-bias-linear"}, "--disable-bias-linear"}}) {
        auto args = sample;
        args.insert(args.end(), opt.begin(), opt.end());
        EXPECT_NE(rejection(args).find("--sample-interval does not run " + name + " models yet"), std::string::npos)
            << name << ": " << rejection(args);
    }
}

// The hang watchdog's limit (core/watchdog.hpp): Megatron's whole minutes, default 10; a
// limit of 0 or less would end every job at its first wait, so it is refused.
TEST(ValidateRanges, DistributedTimeoutIsPositiveMinutes) {
    auto args = tiny::cli();
    EXPECT_EQ(parse_args(args).config.parallel.distributed_timeout_minutes, 10);
    args.insert(args.end(), {"--distributed-timeout-minutes", "3"});
    EXPECT_EQ(parse_args(args).config.parallel.distributed_timeout_minutes, 3);
    EXPECT_NE(rejection({"--distributed-timeout-minutes", "0"}).find("--distributed-timeout-minutes must be positive, got 0"),
              std::string::npos);
    EXPECT_NE(rejection({"--distributed-timeout-minutes", "-1"}).find("--distributed-timeout-minutes must be positive, got -1"),
              std::string::npos);
}

// The two schedule flags of a resumed run exclude each other: a check of the flags alone, so
// it fires at validation (a --dry-run, before any rank reads the checkpoint), not at the load.
TEST(ValidateRanges, BothScheduleFlagsWithLoadAreRefusedAtValidation) {
    const std::string both = "--override-opt_param-scheduler and --use-checkpoint-opt_param-scheduler exclude each other";
    auto args = tiny::cli();
    args.insert(args.end(), {"--load", "no/such/folder", "--override-opt_param-scheduler",
                             "--use-checkpoint-opt_param-scheduler"});
    Config cfg = parse_args(args).config;
    try {
        validate_model_and_training(cfg);
        FAIL() << "both schedule flags were accepted";
    } catch (const UsageError& e) {
        EXPECT_EQ(std::string(e.what()), both);
    }
    // Without --load neither flag means anything (Megatron's load_checkpoint flags); each
    // alone is a choice.
    EXPECT_EQ(rejection({"--override-opt_param-scheduler", "--use-checkpoint-opt_param-scheduler"}), "");
    EXPECT_EQ(rejection({"--load", "x", "--override-opt_param-scheduler"}), "");
    EXPECT_EQ(rejection({"--load", "x", "--use-checkpoint-opt_param-scheduler"}), "");
}

// The monitoring flags: Megatron's names and defaults parse into MonitorConfig, and every
// bad value is rejected naming the flag.
TEST(MonitorFlags, MegatronsNamesAndDefaults) {
    const MonitorConfig d = parse_args(std::vector<std::string>{}).config.monitor;
    EXPECT_EQ(d.timing_log_level, 0);
    EXPECT_EQ(d.timing_log_option, TimingLogOption::MinMax);
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
    EXPECT_EQ(m.timing_log_option, TimingLogOption::All);
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
        {{"--timing-log-option", "mean"}, "--timing-log-option must be one of minmax, max, all, got 'mean'"},
        {{"--profile", "--profile-step-start", "5", "--profile-step-end", "5"}, "--profile-step-start 5 must be"},
        {{"--spiky-loss-window", "2"}, "--spiky-loss-window must be at least 3"},
        {{"--spiky-loss-zscore", "0"}, "--spiky-loss-zscore must be a positive number"},
        {{"--spiky-loss-zscore", "nan"}, "--spiky-loss-zscore must be a positive number"},
        {{"--spiky-loss-max-consecutive", "0"}, "--spiky-loss-max-consecutive must be at least 1"},
    };
    for (const auto& [args, want] : cases)
        EXPECT_NE(rejection(args).find(want), std::string::npos) << args.front() << ": " << rejection(args);
}

// --no-barrier-with-level-1-timing, --profile-ranks, --straggler-minmax-count: Megatron's
// names and defaults (barrier on, rank 0, one rank at each end), and bad values rejected.
TEST(MonitorFlags, BarrierProfileRanksAndMinmaxCount) {
    const MonitorConfig d = parse_args(std::vector<std::string>{}).config.monitor;
    EXPECT_TRUE(d.barrier_with_L1_time());
    EXPECT_EQ(d.profile_ranks, std::vector<int>{0});
    EXPECT_EQ(d.straggler_minmax_count, 1);
    const MonitorConfig m = parse_args({"--no-barrier-with-level-1-timing", "--profile-ranks", "0", "3",
                                        "--straggler-minmax-count", "4"})
                                .config.monitor;
    EXPECT_FALSE(m.barrier_with_L1_time());
    EXPECT_EQ(m.profile_ranks, (std::vector<int>{0, 3}));
    EXPECT_EQ(m.straggler_minmax_count, 4);
    EXPECT_NE(rejection({"--straggler-minmax-count", "0"}).find("--straggler-minmax-count must be at least 1"),
              std::string::npos);
    EXPECT_NE(rejection({"--profile-ranks=-2"}).find("--profile-ranks must be global ranks (>= 0), got -2"),
              std::string::npos)
        << rejection({"--profile-ranks=-2"});
}

// The TensorBoard flags, per-split data paths and --skip-train: parsed into Config, and each
// bad combination rejected with one message naming the flags.
TEST(EvalFlags, TensorboardFlagsParse) {
    std::vector<std::string> args = tiny::cli();
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
    const LoggingConfig d = parse_args(tiny::cli()).config.logging;  // Megatron's defaults
    EXPECT_EQ(d.tensorboard_log_interval, 1);
    EXPECT_EQ(d.tensorboard_queue_size, 1000);
    EXPECT_EQ(rejection({"--tensorboard-log-interval", "0"}), "--tensorboard-log-interval must be positive, got 0");
}

TEST(EvalFlags, PerSplitPathsParseBlends) {
    std::vector<std::string> args = tiny::cli();
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
        const std::string m = rejection(c.extra);
        EXPECT_NE(m.find(c.expect), std::string::npos) << "case '" << c.expect << "' got: '" << m << "'";
    }
    // Valid forms.
    EXPECT_EQ(rejection({"--valid-data-path", "v", "--skip-train"}), "");
    EXPECT_EQ(rejection({"--train-data-path", "t", "--multiple-validation-sets", "--valid-data-path", "a", "b"}), "");
}
