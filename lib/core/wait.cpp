#include "core/wait.hpp"

#include <sched.h>

#include <thread>

namespace gpt {

namespace {
std::mutex g_hook_mutex;
WaitHook g_hook;
}  // namespace

void set_wait_hook(WaitHook hook) {
    std::lock_guard<std::mutex> g(g_hook_mutex);
    g_hook = std::move(hook);
}

void call_wait_hook(const char* what, double waited_s) {
    WaitHook hook;
    {
        std::lock_guard<std::mutex> g(g_hook_mutex);
        hook = g_hook;
    }
    if (hook) hook(what, waited_s);
}

bool poll_until(const std::function<bool()>& done, const char* what, WaitClock::time_point deadline) {
    using namespace std::chrono;
    // Spinning is right for waits of a few microseconds (a small collective between ranks
    // on one node); beyond that the peer we wait for needs the core more than we do.
    constexpr int kSpins = 64;
    constexpr auto kYieldFor = microseconds(200);
    constexpr auto kMaxSleep = microseconds(1000);
    const auto start = WaitClock::now();
    auto next_report = start + seconds(1);
    auto sleep = microseconds(20);
    for (int polls = 0;; ++polls) {
        if (done()) return true;
        if (polls < kSpins) continue;
        const auto now = WaitClock::now();
        if (now >= deadline) return false;
        if (now >= next_report) {
            call_wait_hook(what, duration<double>(now - start).count());
            next_report = now + seconds(1);
        }
        if (now - start < kYieldFor) {
            sched_yield();
        } else {
            std::this_thread::sleep_for(sleep);
            sleep = std::min(sleep * 2, kMaxSleep);
        }
    }
}

}  // namespace gpt
