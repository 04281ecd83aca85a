// Pipeline-parallel forward/backward of one rank (Megatron's PTD-P "P"): the rank is stage
// s of p and holds v model chunks; chunk c is virtual stage c*p + s with L/(p*v) layers
// (Megatron's interleaved assignment; v = 1 is plain 1F1B). The first virtual stage holds
// the embeddings, the last the final layernorm and the head, whose word-embedding copy is
// kept equal to the first stage's by summing the two gradients over the embedding group.
//
// The trainer owns chunk 0 and its optimizer (so single-chunk code paths stay unchanged);
// the engine owns chunks 1..v-1 and their optimizers and drives all of them.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "dist/process_groups.hpp"
#include "model/gpt_model.hpp"
#include "optim/adam.hpp"
#include "pipeline/executor.hpp"
#include "train/batch_source.hpp"
#include "train/grad_reducer.hpp"
#include "train/shared_activations.hpp"

namespace gpt::train {

// Model chunks per pipeline stage: L / p / --num-layers-per-virtual-pipeline-stage, or 1.
int pipeline_num_chunks(const Config& cfg, const dist::ProcessGroups& groups);
// The layers and pre/post processing of this rank's chunk `chunk`. Throws UsageError when
// the layers do not split evenly over the (virtual) stages. pp == 1: the whole model.
model::ChunkSpec pipeline_chunk_spec(const Config& cfg, const dist::ProcessGroups& groups,
                                     int chunk);
// Micro-batch slots chunk `chunk` needs: the most of its micro-batches the schedule has
// forwarded but not yet run backward at any moment.
int pipeline_slots(const Config& cfg, const dist::ProcessGroups& groups,
                   std::int64_t num_micro_batches, int chunk);
// The most micro-batch chunks alive at once over all of this rank's chunks: the slots of
// an arena the chunks share (train::SharedActivations).
int pipeline_pooled_slots(const Config& cfg, const dist::ProcessGroups& groups,
                          std::int64_t num_micro_batches);

class PipelineEngine {
public:
    // chunk0 / optimizer0: this rank's chunk 0, built with pipeline_chunk_spec(.., 0) and
    // pipeline_slots(.., 0); `opt` are the model options it was built with.
    // shared: the chunks' common activation arena (interleaved schedules; chunk0 lives in
    // it already), or null for one chunk per stage.
    // data: the communicators for backend memory (tensor, data-parallel, pipeline, embedding).
    PipelineEngine(const Config& cfg, dist::ProcessGroups& groups, dist::DataGroups& data,
                   Backend& backend,
                   const model::ModelOptions& opt, std::int64_t num_micro_batches,
                   model::GptModel& chunk0, optim::AdamOptimizer& optimizer0,
                   const SharedActivations* shared = nullptr);
    ~PipelineEngine();
    PipelineEngine(const PipelineEngine&) = delete;
    PipelineEngine& operator=(const PipelineEngine&) = delete;

    // One global batch on this rank: reads the iteration's micro-batches (every stage reads
    // the same ones, so data order and consumed samples match a run without pipelining),
    // runs the schedule, then sums the tied-embedding grads over the embedding group and all
    // grads over data-parallel replicas. Returns the mean lm loss, the same on every rank.
    // dloss: d objective / d token loss; first_stream: global micro-batches done so far.
    double forward_backward(MicroBatchSource& data, float dloss, std::uint64_t first_stream);
    // Adam on every chunk with one grad norm (and overflow flag) over all stages and chunks.
    optim::StepResult step(double lr, double loss_scale);
    // Mean lm loss over `iters` global batches, dropout off, the same on every rank.
    double evaluate(MicroBatchSource& data, int iters);

    int num_chunks() const { return static_cast<int>(chunks_.size()); }
    model::GptModel& chunk(int c) { return *chunks_.at(static_cast<std::size_t>(c)); }
    const model::GptModel& chunk(int c) const { return *chunks_.at(static_cast<std::size_t>(c)); }
    optim::AdamOptimizer& optimizer(int c) { return *optimizers_.at(static_cast<std::size_t>(c)); }
    const optim::AdamOptimizer& optimizer(int c) const { return *optimizers_.at(static_cast<std::size_t>(c)); }
    GradReducer& grad_reducer(int c) { return *reducers_.at(static_cast<std::size_t>(c)); }
    // Compute and receive-wait time of the last forward_backward (wait = the bubble).
    const pipeline::PipelineTiming& last_timing() const { return timing_; }

private:
    struct Slots {
        std::vector<int> free;       // unused slot ids (without a shared arena)
        std::vector<int> of_mb;      // micro-batch -> slot, -1 when none
    };
    std::vector<int>& free_slots(int chunk);
    void read_batch(MicroBatchSource& data);
    int take_slot(int chunk, int mb);
    int release_slot(int chunk, int mb);
    void reset_slots();
    const std::int32_t* tokens_of(int mb) const;
    pipeline::PipelineShape shape(bool forward_only) const;
    // Last stage's value to every rank of the pipeline group (others pass 0).
    double from_last_stage(double value);

    Config cfg_;
    // Boundary activations travel in buffers of the backend's memory over the data pp group
    // (NCCL, or MPI staged through the host); on a host-memory backend in plain host buffers.
    bool device_p2p() const { return !be_.host_memory(); }
    void to_boundary(void* buffer, const void* activation, std::size_t bytes);
    void from_boundary(void* activation, const void* buffer, std::size_t bytes);
    // Forward of micro-batch mb on chunk c in `slot`: tokens and/or the boundary input in,
    // the boundary output out; returns the chunk's mean lm loss per token (0 unless last).
    double stage_forward(int mb, int c, int slot, const void* in, void* out, std::size_t act_bytes,
                         bool train, std::uint64_t stream);

    dist::ProcessGroups& groups_;
    dist::DataGroups& data_;
    Backend& be_;
    pipeline::BufferSpace space_;  // device memory: the backend's allocator
    std::int64_t num_micro_batches_ = 0;
    std::vector<std::unique_ptr<model::GptModel>> owned_chunks_;
    std::vector<std::unique_ptr<optim::AdamOptimizer>> owned_optimizers_;
    std::vector<model::GptModel*> chunks_;
    std::vector<optim::AdamOptimizer*> optimizers_;
    std::vector<std::unique_ptr<GradReducer>> reducers_;  // per chunk
    std::vector<Slots> slots_;
    bool pooled_ = false;          // the chunks take slots from one shared pool
    std::vector<int> pool_free_;
    std::vector<std::int32_t> tokens_;  // the iteration's micro-batches, back to back
    std::size_t sample_elems_ = 0;      // int32 per micro-batch
    pipeline::PipelineTiming timing_;
};

}  // namespace gpt::train
