// Megatron's load flags as one policy over what a checkpoint holds: the second of
// Trainer::load_checkpoint's steps (read, policy, restore). --finetune takes the parameters
// only; --no-load-optim drops the optimizer with its scheduler (and our loss scaler, part of
// its state); --no-load-rng the dropout position; --override-opt_param-scheduler and
// --use-checkpoint-opt_param-scheduler pick whose learning-rate schedule the run follows.
// Here are the checks that compare the flags with the checkpoint; those on the flags alone
// run before the run starts (config/validate.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "config/saved_run.hpp"
#include "optim/lr_scheduler.hpp"
#include "train/state/fp8_checkpoint.hpp"
#include "train/state/saved_progress.hpp"

namespace gpt::train {

// What a checkpoint holds besides its tensors, as read.
struct HeldCheckpoint {
    std::string file;
    std::optional<std::int64_t> vocab_rows;  // the stored word embedding's rows; none: not stored
    std::optional<SavedRun> saved_run;       // none: a file with neither run_config nor the table
    SavedProgress progress;
    std::optional<SavedFp8Scaling> fp8;      // FP8 delayed scaling's state, when stored and used
};

class LoadPolicy {
public:
    explicit LoadPolicy(const Config& run) : run_(run) {}

    // Whether the optimizer's state (Adam moments and steps, the scheduler's position, the
    // loss scaler) and the dropout RNG position are taken from the checkpoint.
    bool load_optim() const { return !run_.checkpoint.finetune && !run_.checkpoint.no_load_optim; }
    bool load_rng() const { return !run_.checkpoint.finetune && !run_.checkpoint.no_load_rng; }

    // Refuses (UsageError, naming both sides) a checkpoint this run cannot take: another
    // padded vocabulary than the run's `padded_vocab_rows`, a model whose tensors mean
    // something else (check_checkpoint_args), a schedule asked for that it does not record.
    // Needs no tensor: the read calls it before reading them.
    void refuse_mismatch(const HeldCheckpoint& held, std::int64_t padded_vocab_rows) const;

    // The progress the run continues from: the saved one, less what the flags leave out.
    // Warns of a seed, or a layout, whose dropout masks will not continue the saved run's.
    SavedProgress progress(const HeldCheckpoint& held, int dp_size, int dp_rank) const;

    // The checkpoint's learning-rate schedule when the run follows it, else nullopt (the
    // flags' schedule `run` stays); logs a difference between the two.
    std::optional<optim::LrScheduler> schedule(const HeldCheckpoint& held, const optim::LrScheduler& run) const;

    // What the flags left out, for the line that reports the load ("" when nothing).
    std::string left_out() const;

private:
    const Config& run_;
};

}  // namespace gpt::train
