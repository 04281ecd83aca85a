// Checks of the TensorBoard flags, the per-split data paths and --skip-train (Megatron's
// rules: --data-path and --split, or --train/valid/test-data-path, never both).
#include <cmath>
#include <cstdlib>

#include "config/validate.hpp"
#include "core/errors.hpp"

namespace gpt {

namespace {

bool is_number(const std::string& s) {
    char* end = nullptr;
    std::strtod(s.c_str(), &end);
    return !s.empty() && end && *end == '\0';
}

// "prefix", "p1 p2 ..." (mixed by size) or "w1 p1 w2 p2 ..." (weights non-negative, finite,
// not all 0): the forms lib/data reads.
void check_blend(const std::vector<std::string>& words, const char* flag) {
    for (const auto& w : words) GPT_REQUIRE(!w.empty(), UsageError, "--", flag, " has an empty prefix");
    if (words.empty() || !is_number(words[0])) {
        for (const auto& w : words)
            GPT_REQUIRE(!is_number(w), UsageError, "--", flag, ": weight '", w,
                        "' among prefixes without weights (give a weight before every prefix, or none)");
        return;
    }
    GPT_REQUIRE(words.size() % 2 == 0, UsageError, "--", flag,
                " with several datasets must alternate weight and prefix, got ", words.size(), " tokens");
    double sum = 0;
    for (std::size_t i = 0; i < words.size(); i += 2) {
        char* end = nullptr;
        const double w = std::strtod(words[i].c_str(), &end);
        GPT_REQUIRE(end && *end == '\0' && w >= 0 && std::isfinite(w), UsageError, "--", flag,
                    " weight '", words[i], "' is not a non-negative number");
        sum += w;
    }
    GPT_REQUIRE(std::isfinite(sum) && sum > 0, UsageError, "--", flag, " weights sum to ", sum,
                ": they must add up to a positive finite number");
}

}  // namespace

void validate_eval_and_tensorboard(const Config& cfg) {
    const LoggingConfig& l = cfg.logging;
    GPT_REQUIRE(l.tensorboard_log_interval > 0, UsageError,
                "--tensorboard-log-interval must be positive, got ", l.tensorboard_log_interval);
    GPT_REQUIRE(l.tensorboard_queue_size > 0, UsageError,
                "--tensorboard-queue-size must be positive, got ", l.tensorboard_queue_size);

    const DataConfig& d = cfg.data;
    if (d.per_split()) {
        GPT_REQUIRE(d.data_path.empty(), UsageError,
                    "--data-path and --train-data-path/--valid-data-path/--test-data-path are exclusive: "
                    "give either one blend with --split, or a blend per split");
        GPT_REQUIRE(!d.split_given, UsageError,
                    "--split applies to --data-path only: with --train-data-path/--valid-data-path/"
                    "--test-data-path each split is its own data set");
        GPT_REQUIRE(!d.train_data_path.empty() || cfg.training.skip_train, UsageError,
                    "--valid-data-path/--test-data-path without --train-data-path: give the training "
                    "data too (or --skip-train to evaluate only)");
    }
    check_blend(d.train_data_path, "train-data-path");
    check_blend(d.valid_data_path, "valid-data-path");
    check_blend(d.test_data_path, "test-data-path");
    if (d.multiple_validation_sets) {
        GPT_REQUIRE(!d.valid_data_path.empty(), UsageError,
                    "--multiple-validation-sets needs --valid-data-path (each prefix there is one set)");
        GPT_REQUIRE(!is_number(d.valid_data_path[0]), UsageError,
                    "--multiple-validation-sets evaluates each --valid-data-path prefix on its own: "
                    "give prefixes without weights");
    }
    GPT_REQUIRE(!cfg.training.skip_train || cfg.training.eval_iters > 0, UsageError,
                "--skip-train evaluates only, but --eval-iters is 0: nothing to do");
}

}  // namespace gpt
