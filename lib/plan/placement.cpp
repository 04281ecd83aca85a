// Group placement from the rank topology: RankGrid (the same object the real run builds its
// process groups from) enumerates the groups, so the planner and the job cannot disagree on
// which groups cross nodes.
#include <algorithm>
#include <sstream>
#include <vector>

#include "core/errors.hpp"
#include "plan/layout.hpp"

#include "dist/rank_grid.hpp"

namespace gpt::plan {

std::string_view recompute_name(Recompute r) {
    switch (r) {
        case Recompute::None: return "none";
        case Recompute::Selective: return "selective";
        case Recompute::Full: return "full";
    }
    return "?";
}

std::string describe_split(const PipelineSplit& s) {
    std::string out;
    if (s.first_stage_layers >= 0) out += " first=" + std::to_string(s.first_stage_layers);
    if (s.last_stage_layers >= 0) out += " last=" + std::to_string(s.last_stage_layers);
    if (s.account_for_embedding) out += " +embedding";
    if (s.account_for_loss) out += " +loss";
    if (!s.layout.empty()) {
        out += " layout=";
        for (std::size_t i = 0; i < s.layout.size(); ++i) out += (i ? "," : "") + std::to_string(s.layout[i]);
    }
    return out;
}

std::string Layout::describe() const {
    std::ostringstream os;
    os << "TP" << tp << " PP" << pp << " DP" << dp;
    // A layout rejected for its shape alone has no batch or switches chosen yet.
    if (global_batch == 0) return os.str();
    os << " VP" << vp << describe_split(split) << " mbs" << micro_batch << " gbs" << global_batch
       << " recompute=" << recompute_name(recompute)
       << (sequence_parallel ? " SP" : "") << (distributed_optimizer ? " DistOpt" : "");
    return os.str();
}

namespace {

bool spans_nodes(const std::vector<int>& ranks, int local) {
    auto [lo, hi] = std::minmax_element(ranks.begin(), ranks.end());
    return (*lo / local) != (*hi / local);
}


}  // namespace

Placement place(int world, int local, int tp, int pp) {
    GPT_REQUIRE(world > 0 && tp > 0 && pp > 0 && world % (tp * pp) == 0, UsageError, "world size ", world,
                " is not divisible by TP x PP = ", tp, " x ", pp);
    GPT_REQUIRE(local > 0 && world % local == 0, UsageError, "--local-world-size ", local,
                " must be positive and divide the world size ", world);
    Placement p;
    p.nodes = world / local;
    // Check every group (O(world) ranks in all), since a group may straddle a node boundary
    // when local_world_size is not a multiple of its size.
    auto neighbours_cross = [local](const std::vector<int>& chain) {
        for (std::size_t i = 1; i < chain.size(); ++i)
            if (chain[i - 1] / local != chain[i] / local) return true;
        return false;
    };
    dist::RankGrid grid(world, tp, pp);
    for (int r = 0; r < world; ++r) {
        dist::RankCoords c = grid.coords(r);
        if (c.tp == 0 && spans_nodes(grid.tp_group(r), local)) p.tp_crosses_nodes = true;
        if (c.dp == 0 && spans_nodes(grid.dp_group(r), local)) p.dp_crosses_nodes = true;
        if (c.pp == 0 && neighbours_cross(grid.pp_group(r))) p.pp_crosses_nodes = true;
    }
    return p;
}

}  // namespace gpt::plan
