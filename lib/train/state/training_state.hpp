// What a checkpoint carries of a run besides the tensors, in one place: the iteration, the
// data positions (training and validation samples consumed), the skipped iterations, the
// dropout position, the learning-rate schedule and the loss scaler. The trainer advances it
// each iteration; save() gives the checkpoint's progress (train/state/saved_progress.hpp)
// and restore() takes one back, so what is saved and what is restored sit side by side.
// The tensors (parameters, Adam moments, FP8 scaling) are the model chunks' own.
#pragma once

#include <cstdint>
#include <optional>

#include "config/config.hpp"
#include "optim/loss_scaler.hpp"
#include "optim/lr_scheduler.hpp"
#include "train/state/saved_progress.hpp"

namespace gpt::train {

struct TrainingState {
    // A fresh run's: iteration 0, the schedule and the loss scaler the flags ask for (a
    // dynamic scaler for --fp16, else a constant one: --loss-scale, or 1).
    explicit TrainingState(const Config& cfg);

    std::int64_t iteration = 0;
    std::int64_t consumed_train = 0;  // training samples consumed: the data position
    std::int64_t consumed_valid = 0;  // the validation loaders' position (Megatron's consumed_valid_samples)
    std::int64_t skipped = 0;         // iterations without an update, in every run so far
    std::uint64_t micro_batches_done = 0;  // this rank's micro-batches: its dropout streams
    std::uint64_t seed = 0;                // --seed, stored with the dropout position
    double flops = 0.0;                    // model FLOPs of every iteration so far (Megatron's formula)
    optim::LrScheduler scheduler;
    optim::LossScaler scaler;

    // The progress a checkpoint stores, on data-parallel rank dp_rank of dp_size;
    // optimizer_steps: the optimizers' own count.
    SavedProgress save(std::int64_t optimizer_steps, int dp_size, int dp_rank) const;
    // Back from a checkpoint's progress, as the load policy passed it on; schedule: the
    // checkpoint's learning-rate schedule when the run takes it (else this run's stays).
    void restore(const SavedProgress& p, const std::optional<optim::LrScheduler>& schedule,
                 int dp_size, int dp_rank);
};

}  // namespace gpt::train
