#include <gtest/gtest.h>

#include <set>

#include "core/errors.hpp"
#include "pipeline/schedule.hpp"
#include "pipeline/simulate.hpp"

using namespace gpt;
using namespace gpt::pipeline;

namespace {
// Every (micro-batch, chunk) forward and backward exactly once, each backward after its forward.
void expect_complete(const std::vector<Action>& s, int m, int v) {
    std::set<std::tuple<int, int, int>> seen;
    for (const Action& a : s) {
        EXPECT_TRUE(seen.insert({int(a.pass), a.microbatch, a.chunk}).second) << to_string(a);
        if (a.pass == Pass::Backward)
            EXPECT_TRUE(seen.count({int(Pass::Forward), a.microbatch, a.chunk})) << to_string(a);
    }
    EXPECT_EQ(int(seen.size()), 2 * m * v);
}
}  // namespace

TEST(Schedule, OneFOneBWarmupSteadyCooldown) {
    // 4 stages, 6 micro-batches, stage 1: 2 warm-up forwards, then 1F1B, then 2 backwards.
    auto s = one_f_one_b_schedule(4, 1, 6);
    std::string got;
    for (auto& a : s) got += to_string(a) + " ";
    EXPECT_EQ(got, "F0.0 F1.0 F2.0 B0.0 F3.0 B1.0 F4.0 B2.0 F5.0 B3.0 B4.0 B5.0 ");
    EXPECT_EQ(max_in_flight(s), 3);                              // p - s
    EXPECT_EQ(max_in_flight(one_f_one_b_schedule(4, 3, 6)), 1);  // last stage
    EXPECT_EQ(max_in_flight(one_f_one_b_schedule(4, 0, 2)), 2);  // capped by m
}

TEST(Schedule, AllSchedulesComplete) {
    for (int p : {1, 2, 3, 4, 8})
        for (int m : {1, 2, 3, 4, 8, 12})
            for (int st = 0; st < p; ++st) {
                expect_complete(one_f_one_b_schedule(p, st, m), m, 1);
                for (int v : {2, 3})
                    if (m % p == 0) expect_complete(interleaved_schedule(p, st, m, v), m, v);
            }
}

TEST(Schedule, InterleavedOrderMatchesMegatron) {
    // p=2, m=4, v=2, stage 0: warm-up 2*(2-0-1) + (2-1)*2 = 4 forwards:
    // chunk 0 for mb 0,1 then chunk 1 for mb 0,1; backwards start with chunk 1.
    auto s = interleaved_schedule(2, 0, 4, 2);
    std::string got;
    for (auto& a : s) got += to_string(a) + " ";
    EXPECT_EQ(got, "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0 ");
    EXPECT_THROW(interleaved_schedule(4, 0, 6, 2), UsageError);  // m % p != 0
}

TEST(Simulate, NoDeadlockAndBubbleMatchesFormula) {
    for (int p : {2, 4, 8})
        for (int m : {8, 16, 32})
            for (int v : {1, 2, 4}) {
                auto r = simulate_pipeline(p, m, v, 1.0, 2.0);
                ASSERT_FALSE(r.deadlock) << "p=" << p << " m=" << m << " v=" << v << ": " << r.detail;
                const double formula = double(p - 1) / (v * m);
                EXPECT_NEAR(r.bubble_fraction, formula, 1e-9)
                    << "p=" << p << " m=" << m << " v=" << v;
            }
    auto one = simulate_pipeline(1, 4, 1, 1.0, 2.0);
    EXPECT_DOUBLE_EQ(one.bubble_fraction, 0.0);
}
