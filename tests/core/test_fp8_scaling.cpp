// FP8 scaling rules (core/fp8_scaling.hpp), each against values worked out by hand from the
// rules Transformer Engine documents and implements for Megatron's --fp8-recipe.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/errors.hpp"
#include "core/fp8_scaling.hpp"

using gpt::AmaxAlgo;
using gpt::DelayedScaling;
using gpt::Fp8Format;

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kFltMax = std::numeric_limits<float>::max();
}  // namespace

TEST(Fp8Scaling, CurrentScaleMapsTheAmaxToTheFormatsLargestValue) {
    EXPECT_EQ(gpt::current_scale(2.0f, Fp8Format::E4M3, kFltMax), 224.0f);
    EXPECT_EQ(gpt::current_scale(0.5f, Fp8Format::E5M2, kFltMax), 114688.0f);
    EXPECT_EQ(gpt::current_scale(3.0f, Fp8Format::E4M3, kFltMax), 448.0f / 3.0f);  // one rounding
    // Nothing to scale, or nothing sensible: 1.
    for (float amax : {0.0f, kInf, kNaN}) EXPECT_EQ(gpt::current_scale(amax, Fp8Format::E4M3, kFltMax), 1.0f) << amax;
    // A quotient past the float range: the largest value of the input's type.
    EXPECT_EQ(gpt::current_scale(1e-38f, Fp8Format::E5M2, kFltMax), kFltMax);
    EXPECT_EQ(gpt::current_scale(1e-38f, Fp8Format::E5M2, 0x1.fep127f), 0x1.fep127f);
}

TEST(Fp8Scaling, AmaxIsTheLargestMagnitudeAndSeesNaN) {
    const std::vector<float> x = {1.0f, -7.5f, 3.0f, -0.0f};
    EXPECT_EQ(gpt::amax_of(x.data(), 4), 7.5f);
    EXPECT_EQ(gpt::amax_of(x.data(), 0), 0.0f);
    const std::vector<float> y = {1.0f, kNaN, 9.0f};
    EXPECT_TRUE(std::isnan(gpt::amax_of(y.data(), 3)));
}

// Three steps of history, the max algorithm, two tensors (E4M3 forward, E5M2 gradient: hybrid).
TEST(Fp8Scaling, DelayedScalingTakesTheMaxOfTheLastStepsAndRolls) {
    DelayedScaling s({Fp8Format::E4M3, Fp8Format::E5M2}, 3, AmaxAlgo::Max, 0);
    EXPECT_EQ(s.scale(0), 1.0f);
    EXPECT_EQ(s.scale(1), 1.0f);
    // Step 1: micro-batches record 2 and 4 for tensor 0 (the step's amax is their max), 8 for 1.
    s.record(0, 2.0f);
    s.record(0, 4.0f);
    s.record(1, 8.0f);
    EXPECT_EQ(s.current()[0], 4.0f);
    s.update();
    EXPECT_EQ(s.scale(0), 448.0f / 4.0f);
    EXPECT_EQ(s.scale(1), 57344.0f / 8.0f);
    EXPECT_EQ(s.scale_inv(0), 4.0f / 448.0f);
    // Rolled: row 0 cleared, step 1's amaxes in the last row.
    EXPECT_EQ(s.history(), (std::vector<float>{0, 0, 0, 0, 4, 8}));
    // Steps 2 and 3 smaller: the max over the window still holds step 1's.
    s.record(0, 1.0f);
    s.record(1, 2.0f);
    s.update();
    EXPECT_EQ(s.history(), (std::vector<float>{0, 0, 4, 8, 1, 2}));
    s.record(0, 0.5f);
    s.record(1, 1.0f);
    s.update();
    EXPECT_EQ(s.scale(0), 448.0f / 4.0f);
    EXPECT_EQ(s.history(), (std::vector<float>{0, 0, 1, 2, 0.5f, 1}));
    // Step 4: step 1 left the window (three steps: 2, 3 and 4).
    s.record(0, 0.25f);
    s.record(1, 0.5f);
    s.update();
    EXPECT_EQ(s.scale(0), 448.0f / 1.0f);
    EXPECT_EQ(s.scale(1), 57344.0f / 2.0f);
}

TEST(Fp8Scaling, MostRecentUsesThisStepsAmaxAndTheMarginDividesByPowersOfTwo) {
    DelayedScaling s({Fp8Format::E4M3}, 4, AmaxAlgo::MostRecent, 2);
    s.record(0, 16.0f);
    s.update();
    EXPECT_EQ(s.scale(0), 448.0f / 4.0f / 16.0f);
    s.record(0, 2.0f);
    s.update();
    EXPECT_EQ(s.scale(0), 448.0f / 4.0f / 2.0f);  // not the history's 16
}

// An amax of 0 (nothing recorded), infinity or NaN keeps the previous scale; the history still
// rolls, and a later finite amax sets the scale again.
TEST(Fp8Scaling, AnUnusableAmaxKeepsThePreviousScale) {
    DelayedScaling s({Fp8Format::E4M3}, 1, AmaxAlgo::MostRecent, 0);
    s.update();
    EXPECT_EQ(s.scale(0), 1.0f);
    s.record(0, 8.0f);
    s.update();
    EXPECT_EQ(s.scale(0), 56.0f);
    for (float bad : {kInf, kNaN}) {
        s.record(0, 1.0f);
        s.record(0, bad);
        s.update();
        EXPECT_EQ(s.scale(0), 56.0f) << bad;
        EXPECT_EQ(s.history()[0], 0.0f);
    }
    s.record(0, 7.0f);
    s.update();
    EXPECT_EQ(s.scale(0), 64.0f);
}

TEST(Fp8Scaling, TheStateRestoresExactlyAndIsChecked) {
    DelayedScaling a({Fp8Format::E4M3, Fp8Format::E5M2}, 2, AmaxAlgo::Max, 0);
    a.record(0, 3.0f);
    a.record(1, 5.0f);
    a.update();
    a.record(0, 6.0f);
    DelayedScaling b({Fp8Format::E4M3, Fp8Format::E5M2}, 2, AmaxAlgo::Max, 0);
    b.restore(a.history(), a.scales());
    a.update();
    b.update();
    EXPECT_EQ(a.history(), b.history());
    EXPECT_EQ(a.scales(), b.scales());
    EXPECT_THROW(b.restore(std::vector<float>(3), a.scales()), gpt::InternalError);
    EXPECT_THROW(DelayedScaling({Fp8Format::E4M3}, 0, AmaxAlgo::Max, 0), gpt::UsageError);
}
