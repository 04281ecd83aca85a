// --profile's window, as Megatron's train loop opens it: on each rank of --profile-ranks
// (default rank 0) the CUDA profiler starts before the step that follows
// --profile-step-start completed iterations and stops after the step that completes
// --profile-step-end, so `nsys --capture-range=cudaProfilerApi` records exactly
// iterations start+1 .. end.
#pragma once

#include <cstdint>

#include "config/config.hpp"

namespace gpt::train {

enum class ProfileEdge { None, Start, Stop };

// What rank `rank` does around a step: before_step with `iteration` steps done, or after
// the step that brought the count to `iteration`.
ProfileEdge profile_edge(const MonitorConfig& mon, int rank, std::int64_t iteration, bool before_step);
// UsageError naming the flag when --profile-ranks names a rank this job does not have.
void check_profile_ranks(const MonitorConfig& mon, int world_size);

}  // namespace gpt::train
