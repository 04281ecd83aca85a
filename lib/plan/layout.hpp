// One candidate parallel layout: the knobs the planner chooses and the groups' placement.
#pragma once

#include <string>
#include <vector>
#include <string_view>

#include "config/enums.hpp"
#include "config/pipeline_split.hpp"

namespace gpt::plan {

// The recompute mode is the option's own enum: the planner reads and writes it unmapped.
using Recompute = RecomputeGranularity;
std::string_view recompute_name(Recompute r);  // "none", "selective", "full"

// " first=1 last=3 +embedding +loss" (the flags given; "" for an even split): the layers of
// the first and last stages, and the embedding or loss counted as a layer.
std::string describe_split(const PipelineSplit& s);

struct Layout {
    int tp = 1;
    int pp = 1;
    int dp = 1;
    int vp = 1;              // virtual pipeline stages (model chunks) per rank; 1: plain 1F1B
    PipelineSplit split;     // the user's uneven stages (the planner never chooses them)
    int micro_batch = 1;     // b
    int global_batch = 1;    // B = b x dp x micro-batches; 0 only in a shape-only rejection
    Recompute recompute = Recompute::None;
    // Full recompute as Megatron's --recompute-method: uniform groups of recompute_layers
    // layers keep only each group's input (the planner's own choice: one layer per group),
    // or block: only the first recompute_layers layers of every model chunk are recomputed.
    int recompute_layers = 1;
    bool recompute_block = false;
    bool sequence_parallel = false;
    bool distributed_optimizer = false;
    // --rampup-batch-size, --step-batch-size-schedule: the smaller micro-batch counts
    // iterations may take (ramp_micro_batch_counts; the search's scheduled_batches); their
    // pipeline schedules can keep more micro-batches alive.
    std::vector<std::int64_t> ramp_micro_batches;

    int world() const { return tp * pp * dp; }
    int micro_batches() const { return global_batch / (micro_batch * dp); }  // m per replica
    // "TP8 PP2 DP1 VP1 mbs1 gbs32 recompute=selective SP DistOpt" ("TP8 PP2 DP1" when global_batch is 0)
    std::string describe() const;
};

// Which groups span nodes, from the rank order global = tp + TP*(dp + DP*pp) and
// local_world_size ranks per node (consecutive ranks share a node, as Slurm places them).
struct Placement {
    int nodes = 1;
    bool tp_crosses_nodes = false;
    bool dp_crosses_nodes = false;
    bool pp_crosses_nodes = false;  // neighbouring stages on different nodes
};

// Throws UsageError when the world is not divisible by tp x pp or local_world_size is invalid.
Placement place(int world_size, int local_world_size, int tp, int pp);

}  // namespace gpt::plan
