// Checks of the TensorBoard flags, the per-split data paths and --skip-train (Megatron's
// rules: --data-path and --split, or --train/valid/test-data-path, never both).
#include <cmath>
#include <cstdlib>

#include "config/data_blend.hpp"
#include "config/validate.hpp"
#include "core/errors.hpp"

namespace gpt {


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
    parse_blend(d.train_data_path, "train-data-path");
    parse_blend(d.valid_data_path, "valid-data-path");
    parse_blend(d.test_data_path, "test-data-path");
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
