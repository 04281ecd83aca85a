// The training progress a checkpoint holds besides the tensors (docs/checkpoint-format.md):
// iteration, data positions, optimizer and scheduler steps, the loss scaler and the dropout
// RNG position, written and read side by side so the two cannot drift apart. The stored
// names and types are the checkpoint format's; older checkpoints load unchanged.
#pragma once

#include <cstdint>

namespace gpt::ckpt {
class CheckpointReader;
class CheckpointWriter;
}  // namespace gpt::ckpt

namespace gpt::train {

// A rank's dropout RNG position, the per-rank blob "rng_state" (raw bytes: keep the layout).
struct RngState {
    std::uint64_t seed = 0;
    std::uint64_t next_stream = 0;  // dropout_stream(micro-batches done, dp_size, dp_rank)
    std::int32_t dp_rank = 0, dp_size = 1;
};

struct SavedProgress {
    std::int64_t iteration = 0;
    std::int64_t consumed_train = 0;  // stored twice: consumed_samples and consumed_train_samples
    std::int64_t consumed_valid = 0, skipped = 0;
    std::int64_t optimizer_steps = 0, scheduler_steps = 0;
    std::int64_t dropout_micro_batches = 0;  // layout-free: global micro-batches (x DP) done
    std::int64_t seed = 0;
    // Megatron's num_floating_point_operations_so_far (model FLOPs of every iteration so far,
    // its formula); 0 from a checkpoint that predates it. --log-progress reports it.
    double flops = 0.0;
    bool dynamic_scaler = false;
    double scale = 1.0;
    int growth = 0, hysteresis = 0;
    bool have_rng = false;  // rng holds this rank's saved position (read only)
    RngState rng;

    // The progress attributes, in the order the format lists them.
    void write_attributes(ckpt::CheckpointWriter& w) const;
    // This rank's RNG position as its entry of the rank blob.
    void write_rng(ckpt::CheckpointWriter& w) const;
    // Everything above. The per-rank RNG position means something only to the same ranks
    // (Megatron loads it when the world size matches): have_rng says whether it was read.
    static SavedProgress read(ckpt::CheckpointReader& r, int world_size, int rank);

    // Micro-batches this rank has done, for a run with dp_size data-parallel ranks: its own
    // saved position when the layout is unchanged, else the layout-free counter.
    bool own_rng(int dp_size, int dp_rank) const {
        return have_rng && rng.dp_size == dp_size && rng.dp_rank == dp_rank;
    }
    std::uint64_t micro_batches_done(int dp_size, int dp_rank) const;
};

}  // namespace gpt::train
