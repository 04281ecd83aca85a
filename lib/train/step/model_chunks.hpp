// This rank's part of the model, whatever the pipeline size: its model chunks (one, the
// whole model, without pipelining; v per stage with an interleaved schedule; see
// train/step/chunk_layout.hpp), their optimizers, their data-parallel gradient reducers and,
// for several chunks, the activation arena they share. One forward-backward runs the
// schedule pipeline::make_schedule gives (sequential for p = v = 1, 1F1B, interleaved
// 1F1B) and ends in one finalize_grads; the trainer drives only the loop around it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "dist/data_groups.hpp"
#include "dist/process_groups.hpp"
#include "model/gpt_model.hpp"
#include "optim/adam.hpp"
#include "pipeline/executor.hpp"
#include "train/step/batch_source.hpp"
#include "train/step/grad_reducer.hpp"
#include "train/step/loss_tally.hpp"
#include "train/run/run_config.hpp"
#include "train/step/shared_activations.hpp"

namespace gpt::train {

// Bytes a rank holds, by kind, over all of its chunks.
struct MemoryReport {
    std::size_t params = 0, grads = 0, optimizer = 0, activations = 0, buffers = 0;
    std::size_t in_use = 0, peak = 0;  // from the backend
};

class ModelChunks {
public:
    // Builds and initialises this rank's chunks, their optimizers and reducers for the
    // run's schedule. data: the communicators for backend memory (tensor, data-parallel,
    // pipeline, embedding).
    ModelChunks(const RunConfig& run, dist::ProcessGroups& groups, dist::DataGroups& data,
                Backend& backend);
    ~ModelChunks();
    ModelChunks(const ModelChunks&) = delete;
    ModelChunks& operator=(const ModelChunks&) = delete;

    // One global batch on this rank: reads the iteration's micro-batches (every stage reads
    // the same ones, so data order and consumed samples do not depend on the layout), runs
    // the schedule, then finalize_grads. Returns the lm loss summed over the global batch's
    // counted tokens and their number, the same on every rank. The gradients are those of
    // loss_scale x Megatron's objective: the mean over micro-batches and data-parallel ranks
    // of each micro-batch's mean token loss, or with --calculate-per-token-loss the plain
    // sum over the global batch (the caller then divides by the tally's tokens in step()).
    // first_stream: global micro-batches done so far; micro_batches: this iteration's per
    // data-parallel rank (at most the run's, which sized the schedule's buffers; fewer while
    // --rampup-batch-size ramps up).
    LossTally forward_backward(MicroBatchSource& data, double loss_scale, std::uint64_t first_stream,
                               std::int64_t micro_batches);
    // Adam on every chunk with one grad norm (and overflow flag) over all stages and chunks,
    // at the learning rates (the word embeddings' and output layer's decoupled_lr, equal to lr
    // without --decoupled-lr) and weight decay the schedule gives for this step. The gradients
    // are divided by grad_divisor first (the loss scale, times the counted tokens with
    // --calculate-per-token-loss).
    optim::StepResult step(double lr, double decoupled_lr, double weight_decay, double grad_divisor);
    // The L2 norm of every parameter of the model (each counted once), the same on every
    // rank: collective over the optimizers' norm group.
    double params_norm();
    // Mean lm loss over `iters` global batches, dropout off, the same on every rank.
    double evaluate(MicroBatchSource& data, int iters);

    int num_chunks() const { return static_cast<int>(chunks_.size()); }
    model::GptModel& chunk(int c) { return *chunks_.at(static_cast<std::size_t>(c)); }
    const model::GptModel& chunk(int c) const { return *chunks_.at(static_cast<std::size_t>(c)); }
    optim::AdamOptimizer& optimizer(int c) { return *optimizers_.at(static_cast<std::size_t>(c)); }
    const optim::AdamOptimizer& optimizer(int c) const { return *optimizers_.at(static_cast<std::size_t>(c)); }
    const GradReducer& grad_reducer(int c) const { return *reducers_.at(static_cast<std::size_t>(c)); }
    // Parameters, gradients, optimizer state, activations and workspace of every chunk
    // (in_use and peak are the caller's: the backend's counters).
    MemoryReport memory() const;
    // Compute and receive-wait time of the last forward_backward (wait = the bubble).
    const pipeline::PipelineTiming& last_timing() const { return timing_; }
    // Megatron's per-phase timers of the step (batch-generator, the pipeline's phases,
    // finalize_grads' and the optimizer's) go to `t` (null: none).
    void set_timers(Timers* t);
    // This rank's own lm loss of the last forward_backward, before any reduction: the mean
    // over its micro-batches' counted tokens on the last pipeline stage, 0 elsewhere.
    double last_local_loss() const { return local_loss_; }
    // The first parameter (layout order, every chunk) whose gradient on this rank is not
    // finite, as "<name>"; "" when all are finite. Reads only the elements this rank's
    // optimizer steps (its shard with the distributed optimizer). For error reports: one
    // pass over the gradients.
    std::string first_non_finite_grad();
    // --check-for-nan-in-loss-and-grad (bf16/fp32): the first parameter (chunk, then layout
    // order) whose gradient on this rank was not finite before the data-parallel reduction
    // of the last forward_backward; "" when none (or the check is off).
    std::string local_non_finite_grad() const;
    // Test hook (fault injection): runs on chunk c's grad buffer before each bucket's local
    // check and reduction (GradReducer::set_before_reduce_hook).
    void set_before_reduce_hook(int c, std::function<void(float*, const GradBucket&)> h);
    // Test hook (fault injection): runs when backward has finished every chunk's gradients,
    // before finalize_grads' embedding-group sum and the reductions it waits for.
    void set_grads_done_hook(std::function<void()> h) { grads_done_hook_ = std::move(h); }

private:
    struct Slots {
        std::vector<int> free;       // unused slot ids (without a shared arena)
        std::vector<int> of_mb;      // micro-batch -> slot, -1 when none
    };
    // Megatron's finalize_model_grads: the tied word embeddings summed over the embedding
    // group, every chunk's data-parallel reduction finished, the sequence-parallel
    // layernorm and bias grads summed over TP.
    void finalize_grads();
    std::vector<int>& free_slots(int chunk);
    void read_batch(MicroBatchSource& data, std::int64_t micro_batches);
    int take_slot(int chunk, int mb);
    int release_slot(int chunk, int mb);
    void reset_slots();
    const std::int32_t* tokens_of(int mb) const;
    pipeline::PipelineShape shape(bool forward_only, std::int64_t micro_batches) const;
    // The data-parallel sum of a tally the pipeline's last stage holds, on every rank.
    LossTally global_tally(LossTally local);
    // Boundary activations travel in buffers of the backend's memory over the data pp group
    // (NCCL, or MPI staged through the host); on a host-memory backend in plain host buffers.
    bool device_p2p() const { return !be_.host_memory(); }
    void to_boundary(void* buffer, const void* activation, std::size_t bytes);
    void from_boundary(void* activation, const void* buffer, std::size_t bytes);
    // Forward of micro-batch mb on chunk c in `slot`: tokens and/or the boundary input in,
    // the boundary output out; returns the chunk's lm loss tally (empty unless last).
    LossTally stage_forward(int mb, int c, int slot, const void* in, void* out, std::size_t act_bytes,
                         bool train, std::uint64_t stream);

    dist::ProcessGroups& groups_;
    dist::DataGroups& data_;
    Backend& be_;
    pipeline::BufferSpace space_;  // device memory: the backend's allocator
    std::int64_t num_micro_batches_ = 0;
    bool per_token_loss_ = false;  // --calculate-per-token-loss
    // Declared before the chunks, which live in it (several chunks per stage only).
    std::unique_ptr<SharedActivations> shared_;
    std::vector<std::unique_ptr<model::GptModel>> chunks_;
    std::vector<std::unique_ptr<optim::AdamOptimizer>> optimizers_;
    std::vector<std::unique_ptr<GradReducer>> reducers_;  // per chunk
    std::vector<Slots> slots_;
    std::vector<int> pool_free_;        // the shared arena's free slots
    std::vector<std::int32_t> tokens_;  // the iteration's micro-batches, back to back
    std::size_t sample_elems_ = 0;      // int32 per micro-batch
    pipeline::PipelineTiming timing_;
    Timers* timers_ = nullptr;
    double local_loss_ = 0.0;
    std::function<void()> grads_done_hook_;
};

}  // namespace gpt::train
