// Megatron's LR schedule and loss-scaler rules.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include "core/errors.hpp"
#include "optim/loss_scaler.hpp"
#include "optim/lr_scheduler.hpp"

namespace gpt::optim {
namespace {

TEST(LrScheduler, WarmupThenLinearAndCosineDecayToMinLr) {
    LrScheduler lin(1e-3, 1e-4, 100, 1100, LrDecayStyle::Linear);
    EXPECT_DOUBLE_EQ(lin.lr_at(0), 0.0);
    EXPECT_DOUBLE_EQ(lin.lr_at(50), 5e-4);
    EXPECT_DOUBLE_EQ(lin.lr_at(100), 1e-3);
    EXPECT_NEAR(lin.lr_at(600), 1e-4 + 0.5 * 9e-4, 1e-15);
    EXPECT_NEAR(lin.lr_at(1100), 1e-4, 1e-15);
    EXPECT_DOUBLE_EQ(lin.lr_at(5000), 1e-4);
    LrScheduler cos(1e-3, 0.0, 0, 1000, LrDecayStyle::Cosine);
    EXPECT_DOUBLE_EQ(cos.lr_at(0), 1e-3);
    EXPECT_NEAR(cos.lr_at(500), 5e-4, 1e-15);
    EXPECT_NEAR(cos.lr_at(250), 0.5 * (std::cos(M_PI * 0.25) + 1) * 1e-3, 1e-15);
    LrScheduler con(2e-4, 0.0, 10, 1000, LrDecayStyle::Constant);
    EXPECT_DOUBLE_EQ(con.lr_at(5), 1e-4);
    EXPECT_DOUBLE_EQ(con.lr_at(999999), 2e-4);
    con.step(5);
    EXPECT_DOUBLE_EQ(con.lr(), 1e-4);
}

TEST(LrScheduler, CountsSamplesFromTheFlags) {
    OptimizerConfig o;
    o.lr = 1e-3;
    o.min_lr = 1e-5;
    o.lr_decay_style = LrDecayStyle::Cosine;
    o.lr_warmup_iters = 10;
    auto s = LrScheduler::from_config(o, 100, 0, 8);  // --train-iters 100, gbs 8
    EXPECT_EQ(s.warmup_steps(), 80);
    EXPECT_EQ(s.decay_steps(), 800);
    o.lr_warmup_iters = 0;
    o.lr_warmup_fraction = 0.01;
    o.lr_decay_iters = 50;
    s = LrScheduler::from_config(o, 100, 0, 8);
    EXPECT_EQ(s.decay_steps(), 400);
    EXPECT_EQ(s.warmup_steps(), 4);
    OptimizerConfig os;
    os.lr = 1e-3;
    os.lr_warmup_samples = 64;
    os.lr_decay_samples = 6400;
    s = LrScheduler::from_config(os, 0, 10000, 8);  // --train-samples
    EXPECT_EQ(s.warmup_steps(), 64);
    EXPECT_EQ(s.decay_steps(), 6400);
    os.lr_warmup_iters = 3;
    EXPECT_THROW(LrScheduler::from_config(os, 0, 10000, 8), UsageError);
    EXPECT_THROW(LrScheduler(1e-3, 0.0, 100, 100, LrDecayStyle::Linear), UsageError);
    EXPECT_THROW(LrScheduler(1e-3, 1e-2, 0, 100, LrDecayStyle::Linear), UsageError);
}

// --decoupled-lr: the embeddings' and output layer's group runs the same schedule (warm-up
// from --lr-warmup-init, the decay style, the lengths) between its own peak and floor, the
// floor --min-lr where --decoupled-min-lr is not given (Megatron's param-group max_lr /
// min_lr); without the flag it is the main group's.
TEST(LrScheduler, DecoupledGroupFollowsTheScheduleBetweenItsOwnPeakAndFloor) {
    OptimizerConfig o;
    o.lr = 1e-3;
    o.min_lr = 1e-4;
    o.lr_warmup_init = 1e-5;
    o.lr_decay_style = LrDecayStyle::Cosine;
    o.lr_warmup_iters = 10;
    LrScheduler plain = LrScheduler::from_config(o, 100, 0, 8);  // 80 warm-up, 800 decay samples
    for (std::int64_t n : {0, 40, 80, 400, 800, 900}) EXPECT_EQ(plain.decoupled_lr_at(n), plain.lr_at(n)) << n;
    o.decoupled_lr = 4e-4;
    LrScheduler floor_min = LrScheduler::from_config(o, 100, 0, 8);
    o.decoupled_min_lr = 2e-5;
    const LrScheduler s = LrScheduler::from_config(o, 100, 0, 8);
    // The main group is unchanged.
    for (std::int64_t n : {0, 40, 80, 400, 800, 900}) EXPECT_EQ(s.lr_at(n), plain.lr_at(n)) << n;
    EXPECT_DOUBLE_EQ(s.decoupled_lr_at(0), 1e-5);
    EXPECT_DOUBLE_EQ(s.decoupled_lr_at(40), 1e-5 + (4e-4 - 1e-5) * 0.5);
    EXPECT_DOUBLE_EQ(s.decoupled_lr_at(80), 4e-4);
    const double halfway = 2e-5 + 0.5 * (std::cos(M_PI * 360.0 / 720.0) + 1.0) * (4e-4 - 2e-5);
    EXPECT_DOUBLE_EQ(s.decoupled_lr_at(440), halfway);
    EXPECT_DOUBLE_EQ(s.decoupled_lr_at(800), 2e-5);
    EXPECT_DOUBLE_EQ(s.decoupled_lr_at(900), 2e-5);
    EXPECT_DOUBLE_EQ(floor_min.decoupled_lr_at(900), 1e-4);  // --min-lr
    LrScheduler stepped = s;
    stepped.step(440);
    EXPECT_DOUBLE_EQ(stepped.decoupled_lr(), halfway);
    // A floor above the peak, or a warm-up starting above it, is refused.
    o.decoupled_min_lr = 5e-4;
    EXPECT_THROW(LrScheduler::from_config(o, 100, 0, 8), UsageError);
    o.decoupled_min_lr = OptimizerConfig::kLrNotGiven;
    o.lr_warmup_init = 5e-4;
    EXPECT_THROW(LrScheduler::from_config(o, 100, 0, 8), UsageError);
}

// Expected values printed by Megatron-LM's own OptimizerParamScheduler (megatron/core/
// optimizer_param_scheduler.py at d98e8a64dd, run with a stub optimizer): max-lr 1e-3,
// min-lr 1e-4, 100 warm-up and 1100 decay samples, WSD annealing over the last 300. Each
// value is a few double operations (and one pow, cos or sqrt of the same libm), each
// rounded by half an ulp: |error| < 10 ulp, about 2e-18 at 1e-3, so 1e-17 absolute.
struct MegatronLrCase {
    const char* name;
    ScheduleSpec spec;
    std::array<double, 13> lr;  // at kSteps
};
constexpr std::array<std::int64_t, 13> kSteps{0, 1, 37, 100, 101, 350, 800, 801, 950, 1099, 1100, 1101, 5000};

ScheduleSpec megatron_base(LrDecayStyle style) {
    return ScheduleSpec{.max_lr = 1e-3, .min_lr = 1e-4, .warmup = 100, .decay = 1100, .style = style};
}

TEST(LrScheduler, FollowsMegatronsWarmupInitInverseSquareRootAndWsd) {
    ScheduleSpec init = megatron_base(LrDecayStyle::Linear);
    init.init_lr = 2e-4;
    ScheduleSpec wsd = megatron_base(LrDecayStyle::Wsd);
    wsd.wsd_decay = 300;
    auto wsd_style = [&](WsdDecayStyle st) {
        ScheduleSpec s = wsd;
        s.wsd_style = st;
        return s;
    };
    const std::vector<MegatronLrCase> cases{
        {"warmup_init", init,
         {0.0002, 0.00020800000000000001, 0.000496, 0.001, 0.0009991, 0.0007750000000000001, 0.00037000000000000005,
          0.0003691, 0.00023500000000000002, 0.0001009, 0.0001, 0.0001, 0.0001}},
        {"inverse-square-root", megatron_base(LrDecayStyle::InverseSquareRoot),
         {0.0, 1e-05, 0.00037, 0.001, 0.000995037190209989, 0.0005345224838248487, 0.00035355339059327376,
          0.00035333262666878667, 0.0003244428422615251, 0.00030164848870338083, 0.0003015113445777636, 0.0001,
          0.0001}},
        {"WSD exponential", wsd_style(WsdDecayStyle::Exponential),
         {0.0, 1e-05, 0.00037, 0.001, 0.001, 0.001, 0.001, 0.000995845917748642, 0.0004727922061357856,
          0.00010208184565795551, 0.0001, 0.0001, 0.0001}},
        {"WSD linear", wsd_style(WsdDecayStyle::Linear),
         {0.0, 1e-05, 0.00037, 0.001, 0.001, 0.001, 0.001, 0.000997, 0.00055, 0.00010299999999999997, 0.0001, 0.0001,
          0.0001}},
        {"WSD cosine", wsd_style(WsdDecayStyle::Cosine),
         {0.0, 1e-05, 0.00037, 0.001, 0.001, 0.001, 0.001, 0.0009999753262144805, 0.00055, 0.00010002467378551954,
          0.0001, 0.0001, 0.0001}},
        {"WSD minus_sqrt", wsd_style(WsdDecayStyle::MinusSqrt),
         {0.0, 1e-05, 0.00037, 0.001, 0.001, 0.001, 0.001, 0.0009480384757729336, 0.0003636038969321072,
          0.00010150125208768378, 0.0001, 0.0001, 0.0001}},
    };
    for (const auto& c : cases) {
        const LrScheduler s(c.spec);
        for (std::size_t i = 0; i < kSteps.size(); ++i)
            EXPECT_NEAR(s.lr_at(kSteps[i]), c.lr[i], 1e-17) << c.name << " at " << kSteps[i];
    }
}

TEST(LrScheduler, WeightDecayRisesAsMegatronsGetWd) {
    // Megatron's get_wd from 0.01 to 0.1 over 1000 samples; values to 10 ulp of 0.1.
    const std::array<std::int64_t, 8> steps{0, 1, 250, 500, 999, 1000, 1001, 3000};
    const std::array<double, 8> linear{0.01, 0.01009, 0.0325, 0.05500000000000001, 0.09991, 0.1, 0.1, 0.1};
    const std::array<double, 8> cosine{0.01, 0.010000222065916381, 0.023180194846605363, 0.05500000000000001,
                                       0.09999977793408363, 0.1, 0.1, 0.1};
    for (const auto& [style, want] : {std::pair{WeightDecayIncrStyle::Linear, linear},
                                      std::pair{WeightDecayIncrStyle::Cosine, cosine}}) {
        ScheduleSpec sp = megatron_base(LrDecayStyle::Linear);
        sp.start_wd = 0.01;
        sp.end_wd = 0.1;
        sp.wd_incr = 1000;
        sp.wd_style = style;
        LrScheduler s(sp);
        for (std::size_t i = 0; i < steps.size(); ++i)
            EXPECT_NEAR(s.weight_decay_at(steps[i]), want[i], 1e-15) << style << " at " << steps[i];
        s.set_num_steps(500);
        EXPECT_EQ(s.weight_decay(), s.weight_decay_at(500));
    }
}

TEST(LrScheduler, WsdAndWeightDecayFromTheFlags) {
    OptimizerConfig o;
    o.lr = 1e-3;
    o.min_lr = 1e-4;
    o.lr_decay_style = LrDecayStyle::Wsd;
    o.lr_wsd_decay_iters = 30;
    o.lr_wsd_decay_style = WsdDecayStyle::Linear;
    o.lr_warmup_iters = 10;
    o.weight_decay = 0.05;
    auto s = LrScheduler::from_config(o, 100, 0, 8);  // --train-iters 100, gbs 8
    EXPECT_EQ(s.spec().wsd_decay, 240);
    EXPECT_EQ(s.spec().wsd_style, WsdDecayStyle::Linear);
    EXPECT_EQ(s.weight_decay_steps(), 800);
    EXPECT_EQ(s.weight_decay_at(0), 0.05);  // constant: --weight-decay
    EXPECT_EQ(s.lr_at(560), 1e-3);          // the stable phase ends at 800 - 240
    EXPECT_LT(s.lr_at(561), 1e-3);
    o.weight_decay_incr_style = WeightDecayIncrStyle::Cosine;
    EXPECT_THROW(LrScheduler::from_config(o, 100, 0, 8), UsageError);  // no start/end
    o.start_weight_decay = 0.0;
    o.end_weight_decay = 0.1;
    s = LrScheduler::from_config(o, 100, 0, 8);
    EXPECT_EQ(s.weight_decay_at(0), 0.0);
    EXPECT_EQ(s.weight_decay_at(800), 0.1);
    o.lr_wsd_decay_iters = 91;  // does not fit in the 90 iterations after the warm-up
    EXPECT_THROW(LrScheduler::from_config(o, 100, 0, 8), UsageError);
    o.lr_wsd_decay_iters = 90;
    EXPECT_NO_THROW(LrScheduler::from_config(o, 100, 0, 8));
    o.lr_warmup_iters = 0;
    o.lr_warmup_samples = 80;
    EXPECT_THROW(LrScheduler::from_config(o, 0, 800, 8), UsageError);  // --lr-wsd-decay-iters with --train-samples
    o.lr_wsd_decay_iters = 0;
    o.lr_wsd_decay_samples = 240;
    s = LrScheduler::from_config(o, 0, 800, 8);
    EXPECT_EQ(s.spec().wsd_decay, 240);
    EXPECT_EQ(s.weight_decay_steps(), 800);
    ScheduleSpec bad = megatron_base(LrDecayStyle::Linear);
    bad.init_lr = 2e-3;  // above --lr
    EXPECT_THROW(LrScheduler{bad}, UsageError);
}

TEST(LossScaler, DynamicFollowsMegatronsHysteresisAndWindow) {
    auto s = LossScaler::dynamic(65536.0, 1.0, 3, 2);
    s.update(true);  // hysteresis 2 -> 1: keep the scale
    EXPECT_EQ(s.scale(), 65536.0);
    s.update(true);  // used up: halve
    EXPECT_EQ(s.scale(), 32768.0);
    s.update(true);  // still used up: halve again
    EXPECT_EQ(s.scale(), 16384.0);
    s.update(false);
    s.update(false);
    EXPECT_EQ(s.scale(), 16384.0);
    s.update(true);  // an overflow resets the clean-step count
    EXPECT_EQ(s.scale(), 8192.0);
    s.update(false);
    s.update(false);
    s.update(false);  // window of 3 clean steps: double, restore hysteresis
    EXPECT_EQ(s.scale(), 16384.0);
    EXPECT_EQ(s.hysteresis_tracker(), 2);
    s.update(true);
    EXPECT_EQ(s.scale(), 16384.0);
    auto floor = LossScaler::dynamic(4.0, 2.0, 1000, 1);
    for (int i = 0; i < 5; ++i) floor.update(true);
    EXPECT_EQ(floor.scale(), 2.0);
    auto c = LossScaler::constant(128.0);
    c.update(true);
    c.update(false);
    EXPECT_EQ(c.scale(), 128.0);
    EXPECT_THROW(LossScaler::dynamic(1.0, 2.0, 10, 2), UsageError);
}

}  // namespace
}  // namespace gpt::optim
