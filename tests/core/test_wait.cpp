// The project's one blocking wait (core/wait.hpp): it completes, honours a deadline, and
// the wait hook - the watchdog's handle - sees long waits and can end them.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "core/wait.hpp"

using namespace gpt;

namespace {
struct HookReset {
    ~HookReset() { set_wait_hook({}); }
};
}  // namespace

TEST(Wait, PollUntilReturnsWhenDone) {
    int polls = 0;
    EXPECT_TRUE(poll_until([&] { return ++polls == 1000; }, "test"));
    EXPECT_EQ(polls, 1000);
}

TEST(Wait, PollUntilStopsAtTheDeadline) {
    EXPECT_FALSE(poll_until([] { return false; }, "test", WaitClock::now() + std::chrono::milliseconds(20)));
}

TEST(Wait, TheHookSeesALongWaitAndCanEndIt) {
    HookReset reset;
    std::string seen;
    set_wait_hook([&](const char* what, double waited_s) {
        seen = what;
        if (waited_s >= 1.0) throw std::runtime_error("watchdog");
    });
    EXPECT_THROW(poll_until([] { return false; }, "a stopped peer"), std::runtime_error);
    EXPECT_EQ(seen, "a stopped peer");
}

TEST(Wait, ConditionVariableWaitsReportToTheHook) {
    HookReset reset;
    std::atomic<int> calls{0};
    set_wait_hook([&](const char*, double) { ++calls; });
    std::mutex m;
    std::condition_variable cv;
    bool ready = false;
    std::thread t;
    {
        std::unique_lock<std::mutex> lock(m);
        // The other thread makes the predicate true only after the hook has run once.
        t = std::thread([&] {
            while (calls.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            std::lock_guard<std::mutex> g(m);
            ready = true;
            cv.notify_all();
        });
        wait_cv(cv, lock, [&] { return ready; }, "a worker");
        EXPECT_TRUE(ready);
    }
    t.join();
    EXPECT_GE(calls.load(), 1);
}
