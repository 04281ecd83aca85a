#include "train/monitor/profile_window.hpp"

#include <algorithm>

#include "core/errors.hpp"

namespace gpt::train {

ProfileEdge profile_edge(const MonitorConfig& mon, int rank, std::int64_t iteration, bool before_step) {
    if (!mon.profile) return ProfileEdge::None;
    const auto& ranks = mon.profile_ranks;
    if (std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) return ProfileEdge::None;
    if (before_step && iteration == mon.profile_step_start) return ProfileEdge::Start;
    if (!before_step && iteration == mon.profile_step_end) return ProfileEdge::Stop;
    return ProfileEdge::None;
}

void check_profile_ranks(const MonitorConfig& mon, int world_size) {
    if (!mon.profile) return;
    for (const int r : mon.profile_ranks)
        GPT_REQUIRE(r >= 0 && r < world_size, UsageError, "--profile-ranks ", r, " is not a rank of this ",
                    world_size, "-rank job (ranks 0..", world_size - 1, ")");
}

}  // namespace gpt::train
