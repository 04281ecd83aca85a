// Resolves derived values (data-parallel size, ffn size, global batch, ...) and rejects
// impossible combinations with a message that names the numbers that disagree.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.hpp"

namespace gpt {

// Model shape, precision and schedule checks that do not depend on the world size.
void validate_model_and_training(Config& cfg);

// One 16-bit type at most, and a static --loss-scale only with one: Megatron applies it to
// 16-bit training only, and a flag that would do nothing is refused rather than ignored.
// validate_model_and_training calls it, as does train::check_supported for a Config built by
// hand. Throws UsageError.
void validate_precision(const TrainingConfig& t);

// A training length, --train-iters or --train-samples (Megatron asserts one of them): every
// training run needs one (train::resolve_run calls it; --plan-only, which trains nothing,
// does not). Throws UsageError.
void validate_training_length(const TrainingConfig& t);

// --tensorboard-*, --train/valid/test-data-path with --data-path/--split, --multiple-validation-sets,
// --skip-train (validate_eval.cpp); called by validate_model_and_training.
void validate_eval_and_tensorboard(const Config& cfg);

// Layout checks for `world_size` ranks: TP x PP divides the world, heads % TP, layers % PP
// (and virtual stages), global batch % (micro-batch x DP); fills data_parallel_size and,
// when not given, global_batch_size. Throws UsageError.
void resolve_layout(Config& cfg, int world_size);

// The layers split over the pipeline stages and their virtual stages as the flags ask
// (config/pipeline_split.hpp): equal counts unless --decoder-first/last-pipeline-num-layers
// say otherwise. resolve_layout calls it, as does train::pipeline_num_chunks for a Config
// built by hand. Throws UsageError.
void validate_pipeline_split(int num_layers, const ParallelConfig& p);

// --use-checkpoint-args needs --load; its two companions need it. Throws UsageError.
void validate_checkpoint_args_flags(const CheckpointConfig& ck);

// --non-persistent-save-interval / -ckpt-type / -global-ckpt-dir: Megatron's combinations,
// the global type only, and a folder other than --save's and --load's. Throws UsageError.
void validate_non_persistent_flags(const CheckpointConfig& ck);

// Micro-batches per iteration and data-parallel rank: global batch / (micro-batch x DP),
// the one computation of it. UsageError when the layout cannot split the global batch.
std::int64_t micro_batches_per_iteration(const TrainingConfig& t, int dp);

// The optimizer's flags and the learning-rate and weight-decay schedule's (validate_schedule.cpp):
// values in range, Megatron's combinations; sets --start/--end-weight-decay to --weight-decay
// for the constant style. validate_model_and_training calls it. Throws UsageError.
void validate_schedule(OptimizerConfig& o);

// --sample-interval and its flags (called by resolve_layout, once PP is known).
void validate_samples(const Config& cfg);
// The monitoring flags (timers, straggler report, profiler window, NaN and spike guards):
// values in range. validate_model_and_training calls it. Throws UsageError.
void validate_monitor(const MonitorConfig& m);

// FP8 (validate_fp8.cpp). validate_fp8: every --fp8-* value in range, the recipe one this
// build implements, FP8 only in a 16-bit run, --first-last-layers-bf16's counts, and the
// GEMM dimensions that do not depend on the layout (validate_model_and_training calls it).
// validate_fp8_layout: the rest, once TP, PP and the micro-batch are known (resolve_layout
// calls it). Throws UsageError, one line naming the flag and the value.
void validate_fp8(const Config& cfg);
void validate_fp8_layout(const Config& cfg);

// cuBLASLt's FP8 GEMMs on Hopper need every dimension a multiple of 16 (Transformer Engine
// refuses other shapes before launching one).
inline constexpr int kFp8GemmMultiple = 16;
// The first dimension of the FP8 linear layers' GEMMs that is not a multiple of 16, as one
// line naming it, its flags and its value; "" when every one is. The dimensions: the hidden
// size, the ffn hidden size and the QKV projection's width (qkv_width, (a + 2g) h / a), their
// slices over `tp` tensor-parallel ranks, and the tokens of a micro-batch, seq_length x
// micro_batch. tp or micro_batch 0: not known yet, those dimensions are not checked.
std::string fp8_gemm_dims_problem(int hidden, int ffn, std::int64_t qkv_width, int seq_length, int tp,
                                  int micro_batch);
// Megatron's bound on --num-layers-at-start/end-in-bf16 with --first-last-layers-bf16: each
// at most the layers of one pipeline stage (num_layers / pp). "" or the one-line reason.
std::string fp8_bf16_layers_problem(const Fp8Config& f, int num_layers, int pp);

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
