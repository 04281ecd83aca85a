// Megatron's timer block gathered over ranks, and the straggler report of --log-straggler.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include "dist/process_groups.hpp"
#include "train/monitor/timer_log.hpp"

namespace gpt::train {
namespace {

TimerTable table(int ranks, std::initializer_list<std::pair<Phase, std::vector<double>>> rows) {
    TimerTable t;
    t.ranks = ranks;
    t.seconds.assign(static_cast<std::size_t>(ranks) * kNumPhases, 0.0);
    for (const auto& [p, per_rank] : rows)
        for (int r = 0; r < ranks; ++r)
            t.seconds[static_cast<std::size_t>(r) * kNumPhases + static_cast<std::size_t>(p)] = per_rank[r];
    return t;
}

// Megatron's exact layout: name, a space, dots to 48 characters, ": (min, max)" in ms per
// iteration (the interval's seconds x 1000 / iterations); a rank without the phase (0) is
// not its minimum; level-2 phases only at level 2.
TEST(TimerLog, MinMaxBlockIsMegatronsFormat) {
    const TimerTable t = table(3, {{Phase::ForwardBackward, {0.2468, 0.2512, 0.25}},
                                   {Phase::ForwardRecv, {0.0, 0.01, 0.03}},
                                   {Phase::Optimizer, {0.02, 0.02, 0.04}}});
    EXPECT_EQ(format_timers(t, 1, TimingLogOption::MinMax, 20.0),
              "(min, max) time across ranks (ms):\n"
              "    forward-backward ...............................: (12.34, 12.56)\n"
              "    optimizer ......................................: (1.00, 2.00)");
    EXPECT_EQ(format_timers(t, 2, TimingLogOption::MinMax, 20.0),
              "(min, max) time across ranks (ms):\n"
              "    forward-backward ...............................: (12.34, 12.56)\n"
              "    forward-recv ...................................: (0.50, 1.50)\n"
              "    optimizer ......................................: (1.00, 2.00)");
    EXPECT_EQ(format_timers(t, 1, TimingLogOption::Max, 20.0),
              "max time across ranks (ms):\n"
              "    forward-backward ...............................: 12.56\n"
              "    optimizer ......................................: 2.00");
    EXPECT_EQ(format_timers(table(2, {{Phase::ForwardRecv, {0.0, 0.01}}}), 2, TimingLogOption::All, 1.0),
              "times across ranks (ms):\n  forward-recv:\n     rank  1: 10.00");
    EXPECT_EQ(format_timers(t, 0, TimingLogOption::MinMax, 20.0), "");  // level 0 prints nothing
    EXPECT_EQ(format_timers(table(2, {}), 2, TimingLogOption::MinMax, 1.0), "");
}

// Every rank's timers reach every rank: a 2-rank job with a deliberately unbalanced phase.
TEST(TimerLog, GatherGivesEveryRanksTimes) {
    dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
    const int n = groups.world_size(), me = groups.rank();
    Timers timers(1);
    timers.add(Phase::ForwardBackward, 0.010 * (me + 1));  // rank r: 10 (r+1) ms
    if (me == n - 1) timers.add(Phase::EmbeddingGradsAllReduce, 0.003);
    const TimerTable t = gather_timers(timers, groups.world());
    ASSERT_EQ(t.ranks, n);
    for (int r = 0; r < n; ++r) {
        EXPECT_DOUBLE_EQ(t.at(r, Phase::ForwardBackward), 0.010 * (r + 1));
        EXPECT_EQ(t.at(r, Phase::EmbeddingGradsAllReduce), r == n - 1 ? 0.003 : 0.0);
    }
    const std::string block = format_timers(t, 1, TimingLogOption::MinMax, 1.0);
    char want[128];
    std::snprintf(want, sizeof want, "forward-backward ...............................: (10.00, %.2f)", 10.0 * n);
    EXPECT_NE(block.find(want), std::string::npos) << block;
    EXPECT_NE(block.find("embedding-grads-all-reduce .....................: (3.00, 3.00)"), std::string::npos) << block;
}

// --log-timers-to-tensorboard: the maximum over ranks in seconds per iteration, phases up
// to the level that some rank ran.
TEST(TimerLog, TensorboardValuesAreTheMaximaPerIteration) {
    const TimerTable t = table(3, {{Phase::ForwardBackward, {0.2468, 0.2512, 0.25}},
                                   {Phase::ForwardRecv, {0.0, 0.01, 0.03}},
                                   {Phase::Optimizer, {0.02, 0.0, 0.04}}});
    const auto m = timer_maxima(t, 1, 20.0);
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0].first, Phase::ForwardBackward);
    EXPECT_DOUBLE_EQ(m[0].second, 0.2512 / 20.0);
    EXPECT_EQ(m[1].first, Phase::Optimizer);
    EXPECT_DOUBLE_EQ(m[1].second, 0.04 / 20.0);
    EXPECT_EQ(timer_maxima(t, 2, 20.0).size(), 3u);
    EXPECT_TRUE(timer_maxima(t, 0, 20.0).empty());
}

TEST(TimerLog, StragglersAreTheSlowestAboveTheMedian) {
    EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2.0);
    EXPECT_DOUBLE_EQ(median({4, 1, 2, 3}), 2.5);
    // Rank 5 is the planted straggler; rank 2 a little slow; the rest at 100 ms.
    const std::vector<double> ms{100, 100, 110, 100, 100, 150, 100, 100};
    const auto s = select_stragglers(ms, 3);
    ASSERT_EQ(s.size(), 2u);  // only ranks slower than the median
    EXPECT_EQ(s[0].rank, 5);
    EXPECT_DOUBLE_EQ(s[0].over_median, 0.5);
    EXPECT_EQ(s[1].rank, 2);
    EXPECT_NEAR(s[1].over_median, 0.1, 1e-12);
    EXPECT_EQ(select_stragglers(ms, 1).size(), 1u);
    EXPECT_TRUE(select_stragglers({100, 100}, 3).empty());
    EXPECT_TRUE(select_stragglers({0, 0, 0}, 3).empty());
    EXPECT_EQ(format_straggler(s[0], "node07", 100.0),
              " straggler: rank 5 (node07): compute 150.00 ms per iteration, 50.0% slower than the median 100.00 ms");
}

// --straggler-minmax-count N: the N slowest above the median, then the N fastest below it.
TEST(TimerLog, StragglerReportShowsMinmaxCountRanksAtEachEnd) {
    const std::vector<double> ms{100, 80, 110, 100, 90, 150, 100, 100};
    const auto f = select_fastest(ms, 3);
    ASSERT_EQ(f.size(), 2u);  // only ranks faster than the median
    EXPECT_EQ(f[0].rank, 1);
    EXPECT_DOUBLE_EQ(f[0].over_median, -0.2);
    EXPECT_EQ(f[1].rank, 4);
    EXPECT_EQ(format_fastest(f[0], "node01", 100.0),
              " fastest: rank 1 (node01): compute 80.00 ms per iteration, 20.0% faster than the median 100.00 ms");
    std::vector<std::string> hosts;
    for (int r = 0; r < 8; ++r) hosts.push_back(std::string("n").append(std::to_string(r)));
    const auto one = straggler_report(ms, hosts, 1);  // Megatron's default: one at each end
    ASSERT_EQ(one.size(), 2u);
    EXPECT_EQ(one[0].rfind(" straggler: rank 5 (n5)", 0), 0u) << one[0];
    EXPECT_EQ(one[1].rfind(" fastest: rank 1 (n1)", 0), 0u) << one[1];
    const auto two = straggler_report(ms, hosts, 2);
    ASSERT_EQ(two.size(), 4u);
    EXPECT_EQ(two[1].rfind(" straggler: rank 2 (n2)", 0), 0u) << two[1];
    EXPECT_EQ(two[3].rfind(" fastest: rank 4 (n4)", 0), 0u) << two[3];
    EXPECT_TRUE(straggler_report({100, 100, 100}, hosts, 4).empty());
}

TEST(TimerLog, HostNamesOfEveryRank) {
    dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
    const auto hosts = gather_hostnames(groups.world());
    ASSERT_EQ(static_cast<int>(hosts.size()), groups.world_size());
    char mine[256] = {};
    gethostname(mine, sizeof mine - 1);
    EXPECT_EQ(hosts[static_cast<std::size_t>(groups.rank())], mine);
    for (const auto& h : hosts) EXPECT_FALSE(h.empty());
}

}  // namespace
}  // namespace gpt::train
