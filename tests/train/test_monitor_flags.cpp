// Megatron's --profile-ranks window and the level-1 timers' barrier (barrier_with_L1_time,
// off with --no-barrier-with-level-1-timing) as the trainer uses them.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "core/errors.hpp"
#include "train/monitor/profile_window.hpp"
#include "train/trainer.hpp"
#include "trainer_test_util.hpp"

namespace gpt::train {
namespace {

// The window opens before iteration start+1 and closes after iteration end, on the ranks
// of --profile-ranks only; nothing without --profile.
TEST(ProfileWindow, ExactlyTheStepsOnTheNamedRanks) {
    MonitorConfig m;
    m.profile = true;
    m.profile_step_start = 3;
    m.profile_step_end = 5;
    m.profile_ranks = {1, 3};
    for (int rank = 0; rank < 5; ++rank) {
        const bool named = rank == 1 || rank == 3;
        for (std::int64_t it = 0; it <= 8; ++it) {
            EXPECT_EQ(profile_edge(m, rank, it, true), named && it == 3 ? ProfileEdge::Start : ProfileEdge::None)
                << "rank " << rank << " before step " << it + 1;
            EXPECT_EQ(profile_edge(m, rank, it, false), named && it == 5 ? ProfileEdge::Stop : ProfileEdge::None)
                << "rank " << rank << " after step " << it;
        }
    }
    m.profile = false;
    EXPECT_EQ(profile_edge(m, 1, 3, true), ProfileEdge::None);
    m.profile = true;
    EXPECT_NO_THROW(check_profile_ranks(m, 4));
    try {
        check_profile_ranks(m, 2);
        FAIL() << "rank 3 of a 2-rank job accepted";
    } catch (const UsageError& e) {
        EXPECT_EQ(std::string(e.what()), "--profile-ranks 3 is not a rank of this 2-rank job (ranks 0..1)");
    }
}

// A training step at --timing-log-level 1 and 2 takes one world barrier per level-1 phase
// it starts, the same number on every rank (else a barrier would hang): forward-backward,
// all-grads-sync, optimizer, optimizer-clip-main-grad, optimizer-inner-step, and with a
// pipeline embedding-grads-all-reduce on every stage. None at level 0, with
// --no-barrier-with-level-1-timing, or on one rank.
TEST(BarrierWithL1Time, OneWorldBarrierPerLevelOnePhaseOnEveryRank) {
    int world = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    struct Case {
        int level, pp;
        bool barrier;
        std::int64_t per_step;
    };
    std::vector<Case> cases{{1, 1, true, 5}, {2, 1, true, 5}, {0, 1, true, 0}, {2, 1, false, 0}};
    if (world == 2) cases.push_back({1, 2, true, 6});
    for (const Case& c : cases) {
        Config cfg = test::tiny::train();
        cfg.monitor.timing_log_level = c.level;
        cfg.monitor.no_barrier_with_level_1_timing = !c.barrier;
        dist::ProcessGroups groups(MPI_COMM_WORLD, 1, c.pp);
        auto be = make_backend("cpu", 0);
        Trainer tr(cfg, groups, *be);
        test::WalkSource src(cfg.model.vocab_size, cfg.model.seq_length, cfg.training.micro_batch_size,
                             groups.coords().dp, groups.grid().dp_size());
        tr.train_step(src);
        tr.train_step(src);
        const std::int64_t want = world > 1 ? 2 * c.per_step : 0;
        std::int64_t got = tr.timers().barriers_taken(), lo = got, hi = got;
        MPI_Allreduce(&got, &lo, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&got, &hi, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
        EXPECT_EQ(got, want) << "level " << c.level << ", pp " << c.pp << ", barrier " << c.barrier;
        EXPECT_EQ(lo, hi) << "ranks took different numbers of barriers";
    }
}

}  // namespace
}  // namespace gpt::train
