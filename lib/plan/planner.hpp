// Entry points app/gpt_pretrain calls: plan-only mode (ranked table or JSON of feasible
// layouts) and auto mode (fill cfg.parallel and the batch sizes with the best layout).
#pragma once

#include <ostream>
#include <string>

#include "config/config.hpp"
#include "plan/search.hpp"

namespace gpt::plan {

// The search inputs for cfg on world_size ranks, local_world_size per node: the model shape,
// the device preset (--plan-device when lib/config has it, else "cpu" for --device cpu, else
// h100-80gb for plan-only / the backend this binary was built with for auto mode), its
// memory (DEVICE_MEMORY_GB, detected, or preset), the fabric and every constraint the user
// gave (tp_given, pp_given, mbs_given, global batch, max global batch, data-parallel size,
// virtual stages, recompute, sequence parallel, distributed optimizer).
SearchInputs search_inputs_from_config(const Config& cfg, int world_size, int local_world_size, bool plan_only);

// Copies a layout into cfg.parallel and cfg.training (micro and global batch size).
void apply_layout(const Layout& layout, int num_layers, Config& cfg);

// Plan-only mode: writes the ranked table (or JSON when cfg.plan.plan_format is json) to `out`.
void print_plan(const gpt::Config& cfg, std::ostream& out);

// Auto mode: fills cfg.parallel (TP, PP, virtual stages, recompute, distributed optimizer,
// sequence parallel), cfg.training.micro_batch_size / global_batch_size for `world_size` ranks
// with `local_world_size` per node, keeping every field the user gave explicitly
// (tp_given/pp_given/mbs_given; global_batch_size > 0 is also a constraint); returns a
// human-readable summary of the choice and the runner-up (for the log). Throws UsageError if
// nothing fits.
std::string choose_layout(gpt::Config& cfg, int world_size, int local_world_size);

}  // namespace gpt::plan

namespace gpt::plan {

// The layout cfg describes (cfg resolved: data_parallel_size and global batch filled in),
// as the memory and time models take it: TP, PP, DP, virtual stages, batch sizes, recompute
// (granularity, and for full its method and layer count), sequence parallelism (only with
// TP > 1, as the model applies it) and the distributed optimizer.
Layout layout_from_config(const gpt::Config& cfg);

// The configured layout's predicted peak memory per rank against the device memory (the
// memory model of the planner, on the device this run uses). Throws UsageError naming the
// shortfall and what to change when it does not fit, so a job that cannot fit fails at
// start-up instead of being killed by the kernel or the GPU mid-run; otherwise returns a
// one-line summary for the log. cfg must be resolved (resolve_layout).
std::string check_memory(const gpt::Config& cfg, int world_size, int local_world_size);

}  // namespace gpt::plan
