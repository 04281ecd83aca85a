// Issue 20 section 6: an fp16 run whose iterations are all skipped warns, then fails, instead
// of ending "training done" with the model untouched.
#include <gtest/gtest.h>

#include "core/errors.hpp"
#include "train/monitor/skip_watch.hpp"

using namespace gpt;

TEST(SkipWatch, LimitCoversTheDynamicScalersRangePlusAHundred) {
    TrainingConfig t;  // Megatron's defaults: 2^32 down to 1, hysteresis 2
    EXPECT_EQ(train::SkipWatch(t).limit(), 100 + 2 * 32);
    t.loss_scale = 1e30;  // constant: nothing changes between iterations
    EXPECT_EQ(train::SkipWatch(t).limit(), 100);
}

TEST(SkipWatch, WarnsAtTenTwentyFortyAndFailsAtTheLimit) {
    TrainingConfig t;
    t.loss_scale = 1024;
    train::SkipWatch w(t);
    std::vector<std::int64_t> warned;
    for (std::int64_t it = 1; it < 100; ++it)
        if (!w.record(true, it, 1024).empty()) warned.push_back(it);
    EXPECT_EQ(warned, (std::vector<std::int64_t>{10, 20, 40, 80}));
    try {
        w.record(true, 100, 1024);
        FAIL() << "100 skipped iterations in a row passed";
    } catch (const NumericError& e) {
        EXPECT_NE(std::string(e.what()).find("no update for 100 iterations in a row"), std::string::npos) << e.what();
    }
}

TEST(SkipWatch, AnUpdateResetsTheCount) {
    TrainingConfig t;
    t.loss_scale = 1024;
    train::SkipWatch w(t);
    for (int round = 0; round < 5; ++round) {
        for (int i = 0; i < 99; ++i) w.record(true, i, 1024);
        EXPECT_EQ(w.record(false, 99, 1024), "");
    }
}
