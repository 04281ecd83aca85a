// Resolves derived values (data-parallel size, ffn size, global batch, ...) and rejects
// impossible combinations with a message that names the numbers that disagree.
#pragma once

#include <cstdint>

#include "config/config.hpp"

namespace gpt {

// Model shape, precision and schedule checks that do not depend on the world size.
void validate_model_and_training(Config& cfg);

// --tensorboard-*, --train/valid/test-data-path with --data-path/--split, --multiple-validation-sets,
// --skip-train (validate_eval.cpp); called by validate_model_and_training.
void validate_eval_and_tensorboard(const Config& cfg);

// Layout checks for `world_size` ranks: TP x PP divides the world, heads % TP, layers % PP
// (and virtual stages), global batch % (micro-batch x DP); fills data_parallel_size and,
// when not given, global_batch_size. Throws UsageError.
void resolve_layout(Config& cfg, int world_size);

// Micro-batches per iteration and data-parallel rank: global batch / (micro-batch x DP),
// the one computation of it. UsageError when the layout cannot split the global batch.
std::int64_t micro_batches_per_iteration(const TrainingConfig& t, int dp);

// --sample-interval and its flags (called by resolve_layout, once PP is known).
void validate_samples(const Config& cfg);
// The monitoring flags (timers, straggler report, profiler window, NaN and spike guards):
// values in range. validate_model_and_training calls it. Throws UsageError.
void validate_monitor(const MonitorConfig& m);

// Both of the above, in order.
void validate(Config& cfg, int world_size);

}  // namespace gpt

namespace gpt {

// Start-up checks of every output path, so that a run fails before training instead of at
// its first save: --save, --log-dir and --data-cache-path are folders (created when
// missing, as Megatron does) that take a real write (a probe file written, fsynced and
// removed: a read-only or full file system fails here); --metrics-file is a writable file
// in such a folder; --save has room for `checkpoint_bytes` (the next checkpoint). `rank`
// names this rank's probe files. Throws UsageError naming the path and the reason.
void check_output_paths(const Config& cfg, std::uint64_t checkpoint_bytes, int rank);

}  // namespace gpt
