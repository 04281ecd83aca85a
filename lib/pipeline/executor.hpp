// Runs a pipeline schedule on one stage: calls the model's forward and backward for each
// action and moves activations and their gradients point to point over the pp group.
// Model chunk c of stage s is virtual stage c*p + s: micro-batches flow s -> s+1 within a
// chunk and from the last stage back to stage 0 between chunks (the interleaved layout).
#pragma once

#include <cstdint>
#include <functional>

#include "core/timers.hpp"
#include "dist/communicator.hpp"
#include "pipeline/schedule.hpp"

namespace gpt::pipeline {

struct StageFunctions {
    // input: the activation from the previous virtual stage, or nullptr for the model's
    // first chunk (it reads its micro-batch itself). output: where to put the activation for
    // the next virtual stage, or nullptr for the model's last chunk (it computes the loss).
    std::function<void(int microbatch, int chunk, const void* input, void* output)> forward;
    // grad_output: from the next virtual stage, or nullptr for the last chunk (the loss).
    // grad_input: where to put the gradient for the previous one, or nullptr for the first.
    std::function<void(int microbatch, int chunk, const void* grad_output, void* grad_input)>
        backward;
};

struct PipelineShape {
    int pp_size = 1;
    int stage = 0;
    int num_microbatches = 1;
    int num_chunks = 1;
    std::int64_t activation_count = 0;  // elements of one boundary activation
    dist::CommType type = dist::CommType::F32;
    bool forward_only = false;  // evaluation: forward_only_schedule, no backward passes
};

// Where the boundary buffers live: host memory when alloc is empty; device memory when the
// pp group moves device buffers (NCCL). Buffers are taken at the start of run_pipeline and
// given back at its end, so a caching `alloc` keeps allocation out of the iterations.
struct BufferSpace {
    std::function<void*(std::size_t bytes)> alloc;
    std::function<void(void* p)> free;
};

struct PipelineTiming {
    double compute_seconds = 0.0;  // inside forward/backward
    double wait_seconds = 0.0;     // blocked receiving (the bubble, plus transfer time)
};

// Runs the whole schedule of one iteration on this stage. `pp` is the pipeline group
// (group rank == stage). timers: Megatron's forward-compute / backward-compute and
// forward-/backward-recv / -send phases (the sends: posting the non-blocking send).
PipelineTiming run_pipeline(const PipelineShape& shape, dist::Communicator& pp,
                            const StageFunctions& fn, const BufferSpace& space = {},
                            Timers* timers = nullptr);

}  // namespace gpt::pipeline
