// Group placement from the rank topology. With gpt_dist built, RankGrid (the same object the
// real run uses) enumerates the groups, so the planner and the job cannot disagree on which
// groups cross nodes; before lib/dist builds, the same formula is applied here.
#include <algorithm>
#include <sstream>
#include <vector>

#include "core/errors.hpp"
#include "plan/layout.hpp"

#if GPT_PLAN_HAVE_RANK_GRID
#include "dist/rank_grid.hpp"
#endif

namespace gpt::plan {

std::string_view recompute_name(Recompute r) {
    switch (r) {
        case Recompute::None: return "none";
        case Recompute::Selective: return "selective";
        case Recompute::Full: return "full";
    }
    return "?";
}

std::string Layout::describe() const {
    std::ostringstream os;
    os << "TP" << tp << " PP" << pp << " DP" << dp << " VP" << vp << " mbs" << micro_batch << " gbs"
       << global_batch << " recompute=" << recompute_name(recompute) << (sequence_parallel ? " SP" : "")
       << (distributed_optimizer ? " DistOpt" : "");
    return os.str();
}

namespace {

bool spans_nodes(const std::vector<int>& ranks, int local) {
    auto [lo, hi] = std::minmax_element(ranks.begin(), ranks.end());
    return (*lo / local) != (*hi / local);
}

#if !GPT_PLAN_HAVE_RANK_GRID
// Megatron's order, global_rank = tp_rank + tp*(dp_rank + dp*pp_rank) (DESIGN.md).
int rank_of(int tp_rank, int dp_rank, int pp_rank, int tp, int dp) {
    return tp_rank + tp * (dp_rank + dp * pp_rank);
}
#endif

}  // namespace

Placement place(int world, int local, int tp, int pp) {
    GPT_REQUIRE(world > 0 && tp > 0 && pp > 0 && world % (tp * pp) == 0, UsageError, "world size ", world,
                " is not divisible by TP x PP = ", tp, " x ", pp);
    GPT_REQUIRE(local > 0 && world % local == 0, UsageError, "--local-world-size ", local,
                " must be positive and divide the world size ", world);
    [[maybe_unused]] const int dp = world / (tp * pp);
    Placement p;
    p.nodes = world / local;
    // Check every group (O(world) ranks in all), since a group may straddle a node boundary
    // when local_world_size is not a multiple of its size.
    auto neighbours_cross = [local](const std::vector<int>& chain) {
        for (std::size_t i = 1; i < chain.size(); ++i)
            if (chain[i - 1] / local != chain[i] / local) return true;
        return false;
    };
#if GPT_PLAN_HAVE_RANK_GRID
    dist::RankGrid grid(world, tp, pp);
    for (int r = 0; r < world; ++r) {
        dist::RankCoords c = grid.coords(r);
        if (c.tp == 0 && spans_nodes(grid.tp_group(r), local)) p.tp_crosses_nodes = true;
        if (c.dp == 0 && spans_nodes(grid.dp_group(r), local)) p.dp_crosses_nodes = true;
        if (c.pp == 0 && neighbours_cross(grid.pp_group(r))) p.pp_crosses_nodes = true;
    }
#else
    std::vector<int> g;
    for (int pr = 0; pr < pp; ++pr)
        for (int dr = 0; dr < dp; ++dr) {
            g.clear();
            for (int t = 0; t < tp; ++t) g.push_back(rank_of(t, dr, pr, tp, dp));
            if (spans_nodes(g, local)) p.tp_crosses_nodes = true;
        }
    for (int pr = 0; pr < pp; ++pr)
        for (int t = 0; t < tp; ++t) {
            g.clear();
            for (int dr = 0; dr < dp; ++dr) g.push_back(rank_of(t, dr, pr, tp, dp));
            if (spans_nodes(g, local)) p.dp_crosses_nodes = true;
        }
    for (int dr = 0; dr < dp; ++dr)
        for (int t = 0; t < tp; ++t) {
            g.clear();
            for (int pr = 0; pr < pp; ++pr) g.push_back(rank_of(t, dr, pr, tp, dp));
            if (neighbours_cross(g)) p.pp_crosses_nodes = true;
        }
#endif
    return p;
}

}  // namespace gpt::plan
