// Search over (TP, PP, DP, virtual stages, micro-batch, global batch, recompute, sequence
// parallelism, distributed optimizer): every layout is checked for divisibility, placement,
// batch and memory, then ranked by predicted tokens per second.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan/device_presets.hpp"
#include "plan/layout.hpp"
#include "plan/memory_model.hpp"
#include "plan/model_shape.hpp"
#include "plan/time_model.hpp"

namespace gpt::plan {

struct SearchInputs {
    ModelShape model;
    DevicePreset device;
    Fabric fabric;
    std::uint64_t device_memory_bytes = 0;
    std::string device_memory_source;
    int world_size = 0;
    int local_world_size = 0;
    // Constraints: 0 / nullopt / false means "free".
    int tp = 0;
    int pp = 0;
    int dp = 0;
    int vp = 0;
    int layers_per_virtual_stage = 0;  // --num-layers-per-virtual-pipeline-stage
    PipelineSplit split;               // uneven stages: kept in every layout
    int micro_batch = 0;
    int global_batch = 0;      // exact global batch (--global-batch-size)
    int max_global_batch = 0;  // upper bound (--max-global-batch-size)
    // The smaller global batches a schedule runs before global_batch (--rampup-batch-size,
    // --step-batch-size-schedule): a layout must split each, and hold the micro-batches the
    // pipeline schedule keeps alive for each.
    std::vector<std::int64_t> scheduled_batches;
    std::optional<Recompute> recompute;
    bool require_sequence_parallel = false;
    bool require_distributed_optimizer = false;
    int max_micro_batch = 16;  // largest micro-batch tried when it is free
};

struct Candidate {
    Layout layout;
    Placement placement;
    MemoryBreakdown memory;   // the stage that needs the most
    TimeBreakdown time;
    double tokens_per_second = 0;
    double model_tflops_per_gpu = 0;     // model FLOPs (no recompute) / time / GPUs
    double hardware_tflops_per_gpu = 0;  // including recomputed work
    double mfu = 0;                      // model_tflops / peak
};

struct Rejection {
    Layout layout;
    std::string reason;
};

struct SearchResult {
    std::vector<Candidate> feasible;   // best first
    std::vector<Rejection> rejected;   // one per reason class and (TP, PP): see search.cpp
    std::int64_t evaluated = 0;        // layouts looked at
    std::int64_t rejected_total = 0;   // layouts rejected
    bool batch_assumed = false;        // no batch given: m = 4 PP micro-batches per replica
};

// Predicts memory and time for one layout (no feasibility check beyond the shape asserts).
Candidate evaluate_layout(const SearchInputs& in, const Layout& layout);
// The same with the placement of (layout.tp, layout.pp) already computed (the search reuses it).
Candidate evaluate_placed_layout(const SearchInputs& in, const Layout& layout, const Placement& placement);

// Every feasible layout, ranked; throws UsageError on inputs that make no search possible.
SearchResult search_layouts(const SearchInputs& in);

// The best feasible candidate that differs from `best` in TP, PP, DP or micro-batch (a real
// alternative, not the same layout with one switch flipped); nullptr when there is none.
const Candidate* runner_up(const SearchResult& r);

}  // namespace gpt::plan
