// Megatron's timers: which phases a level measures, accumulation, and the device sync that
// makes a measured phase honest on an asynchronous device.
#include <gtest/gtest.h>

#include <thread>

#include "core/timers.hpp"

namespace gpt {
namespace {

TEST(Timers, MegatronNamesAndLevels) {
    EXPECT_EQ(phase_name(Phase::ForwardBackward), "forward-backward");
    EXPECT_EQ(phase_level(Phase::ForwardBackward), 1);
    EXPECT_EQ(phase_name(Phase::ForwardCompute), "forward-compute");
    EXPECT_EQ(phase_level(Phase::ForwardCompute), 2);
    EXPECT_EQ(phase_name(Phase::ForwardRecv), "forward-recv");
    EXPECT_EQ(phase_level(Phase::BackwardSend), 2);
    EXPECT_EQ(phase_name(Phase::AllGradsSync), "all-grads-sync");
    EXPECT_EQ(phase_level(Phase::AllGradsSync), 1);
    EXPECT_EQ(phase_name(Phase::Optimizer), "optimizer");
    EXPECT_EQ(phase_level(Phase::Optimizer), 1);
}

TEST(Timers, LevelSelectsWhatIsMeasured) {
    for (int level = 0; level <= 2; ++level) {
        Timers t(level);
        for (int i = 0; i < kNumPhases; ++i) {
            const auto p = static_cast<Phase>(i);
            EXPECT_EQ(t.measured(p), phase_level(p) <= level) << phase_name(p) << " at level " << level;
        }
    }
    Timers t(0);
    t.always_measure(Phase::ForwardCompute);
    EXPECT_TRUE(t.measured(Phase::ForwardCompute));
    EXPECT_FALSE(t.measured(Phase::BackwardCompute));
}

// Megatron's barrier_with_L1_time: a barrier before each measured level-1 timer starts,
// none before level-2 timers (measured or forced) nor at stop.
TEST(Timers, BarrierBeforeMeasuredLevelOneStartsOnly) {
    for (int level = 0; level <= 2; ++level) {
        Timers t(level);
        int barriers = 0;
        t.set_barrier([&] { ++barriers; });
        t.always_measure(Phase::ForwardCompute);  // as --log-straggler does
        int expected = 0;
        for (int i = 0; i < kNumPhases; ++i) {
            const auto p = static_cast<Phase>(i);
            const int before = barriers;
            t.start(p);
            EXPECT_EQ(barriers - before, phase_level(p) == 1 && level >= 1 ? 1 : 0)
                << phase_name(p) << " at level " << level;
            t.stop(p);
            if (phase_level(p) == 1 && level >= 1) ++expected;
        }
        EXPECT_EQ(barriers, expected);
        EXPECT_EQ(t.barriers_taken(), expected);
    }
}

// Only measured phases accumulate time and synchronise the device, at both ends.
TEST(Timers, MeasuredPhasesAccumulateAndSyncAtBothEnds) {
    int syncs = 0;
    Timers t(1, [&syncs] { ++syncs; });
    for (int k = 0; k < 2; ++k) {
        Timers::Scope fb(&t, Phase::ForwardBackward);
        Timers::Scope fc(&t, Phase::ForwardCompute);  // level 2: not measured at 1
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    EXPECT_EQ(syncs, 4);
    EXPECT_GE(t.elapsed(Phase::ForwardBackward), 0.004);  // a lower bound: sleep_for's guarantee
    EXPECT_EQ(t.elapsed(Phase::ForwardCompute), 0.0);
    t.reset();
    EXPECT_EQ(t.elapsed(Phase::ForwardBackward), 0.0);
    Timers::Scope none(nullptr, Phase::Optimizer);  // no timers: nothing happens
}

}  // namespace
}  // namespace gpt
