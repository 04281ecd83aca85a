// The run resolved once, before ranks do different work: the validated flags with the
// planner's layout (when it chose one) and the vocabulary size filled in, and the numbers
// every later step derives from them. Every rank resolves it alike, so an error here is
// every rank's and each may exit on its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "core/dtype.hpp"
#include "dist/rank_grid.hpp"
#include "model/model_spec.hpp"
#include "train/run/data_positions.hpp"
#include "train/run/device_backend.hpp"

namespace gpt::train {

struct FirstCheckpoint;  // train/run/first_checkpoint.hpp

struct RunConfig {
    Config cfg;  // validated; TP, PP, DP, batch sizes and the vocab size filled in
    int world_size = 1;
    int local_world_size = 1;    // ranks on this node
    RunDevice device;            // --device, auto resolved: the backend's and the memory check's
    std::string plan_summary;    // the planner's choice and runner-up; "" when the user chose
    // Derived once from cfg.
    int padded_vocab_size = 0;   // Megatron's padding (make-vocab-size-divisible-by x TP); a checkpoint's rows
    DType dtype = DType::F32;    // --fp16 / --bf16
    std::int64_t num_micro_batches = 0;  // per iteration and data-parallel rank
    // The model's options (precision, dropout, recompute, flash attention, FP8, seed): the
    // training chunks' and the converter's one-rank model's, derived here once.
    model::ModelOptions model_options;
    // Where the data loaders start: a resumed run's from its checkpoint (read here, checked
    // by the Trainer's load), else 0.
    DataPositions data_positions;
};

// Fills the unpadded vocab size from the tokenizer files when not given, as Megatron's
// build_tokenizer does (UsageError when neither is given).
void resolve_vocab(Config& cfg);

// Validates cfg, lets the planner choose the layout when the user left it open (no TP/PP
// given and --max-global-batch-size or --micro-batch-size auto), resolves the layout for
// world_size ranks (local_world_size per node) and the vocabulary; with --load, the padded
// vocabulary and the data positions of the checkpoint to load (train/run/checkpoint_vocab.hpp,
// data_positions.hpp). Throws UsageError. (resolve_run.cpp)
RunConfig resolve_run(Config cfg, int world_size, int local_world_size);

// The run a tool that reads no token ids and trains nothing resolves (prepare_cache): the
// same flags, layout and numbers as resolve_run, without loading the tokenizer (tens of
// milliseconds; only when the planner sizes the embeddings with it), without the checkpoint
// (data positions 0: it starts no loader) and without a GPU probe (device: RunDevice's
// default). The vocabulary stays unresolved (padded_vocab_size 0 without --vocab-size).
RunConfig resolve_data_run(Config cfg, int world_size, int local_world_size);

// The numbers derived from a resolved cfg on the ranks of `grid` (the tail of resolve_run;
// a Config resolved by hand, as tests build them, goes through it too). With --load, the
// data positions of the checkpoint to load. (resolve_run.cpp)
RunConfig derive_run(const Config& cfg, const dist::RankGrid& grid, int local_world_size);
// The same with the checkpoint --load tries first already opened (resolve_run's, which
// opens it once for the vocabulary and the data positions): `first` as
// open_first_checkpoint(cfg.checkpoint) gave it.
RunConfig derive_run(const Config& cfg, const dist::RankGrid& grid, int local_world_size,
                     const std::optional<FirstCheckpoint>& first);

// gpt_generate's run: a checkpoint's Config (generation/load_model: its saved arguments and
// the user's flags) on the TP ranks of `grid`, padded to the checkpoint's `stored_vocab_rows`.
// Derived as a training run is, less what only training has: generation's model options
// (dropout, FP8, recompute, sequence parallelism off: train/run/model_options.hpp), no
// micro-batches (0) and no data positions.
RunConfig generation_run(const Config& cfg, const dist::RankGrid& grid, int local_world_size,
                         std::int64_t stored_vocab_rows);

// "> parallel layout: ..." and the rank table, for the log.
std::string describe_layout(const RunConfig& run);

// The planner's memory model for this layout on the device this run uses (run.device; the
// CPU when no GPU is visible): the log line when it fits, else UsageError naming the shortfall.
std::string check_run_memory(const RunConfig& run);

}  // namespace gpt::train
