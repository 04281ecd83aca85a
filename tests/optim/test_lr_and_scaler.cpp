// Megatron's LR schedule and loss-scaler rules.
#include <gtest/gtest.h>

#include <cmath>

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
