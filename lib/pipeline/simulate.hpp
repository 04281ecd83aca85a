// Replays the schedules of all stages against their data dependencies with given pass
// times: proves a schedule cannot deadlock and measures its pipeline bubble.
#pragma once

#include <string>

namespace gpt::pipeline {

struct SimulationResult {
    bool deadlock = false;
    std::string detail;            // which stages were stuck on what, when deadlocked
    double makespan = 0.0;         // time until the last stage finishes
    double ideal = 0.0;            // one stage's compute: m x (forward + backward)
    double bubble_fraction = 0.0;  // (makespan - ideal) / ideal; Megatron: (p-1)/(v*m)
};

// Pass times are for a whole stage (all its chunks): each chunk takes 1/v of them.
SimulationResult simulate_pipeline(int pp_size, int num_microbatches, int num_chunks,
                                   double t_forward, double t_backward);

}  // namespace gpt::pipeline
