// The steps resolve_run and resolve_data_run share (run_config.cpp). Reading the checkpoint
// --load names is resolve_run's own step (resolve_run.cpp), in a file of its own so that a
// tool that reads no checkpoint (prepare_cache) does not link the checkpoint reader and HDF5
// with its ~40 shared libraries, whose loading was a tenth of a cold index-cache start-up.
#pragma once

#include <string>

#include "config/config.hpp"
#include "dist/rank_grid.hpp"
#include "train/run/run_config.hpp"

namespace gpt::train {

struct ResolvedFlags {
    Config cfg;                // validated; the planner's layout (when it chose), TP/PP/DP and batch sizes
    dist::RankGrid grid;       // the ranks of that layout
    std::string plan_summary;  // the planner's choice and runner-up; "" when the user chose
};
// Validates the flags, lets the planner choose the layout when the user left it open, and
// resolves the layout for world_size ranks. UsageError on bad flags.
ResolvedFlags resolve_flags(Config cfg, int world_size, int local_world_size);

// RunConfig's numbers derived from a resolved cfg on `grid`, without the checkpoint's data
// positions; probe_device false: the device stays RunDevice's default (no GPU probe).
RunConfig derive_common(const Config& cfg, const dist::RankGrid& grid, int local_world_size, bool probe_device);

}  // namespace gpt::train
