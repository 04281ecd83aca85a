// The one blocking wait of the project. Every wait for another rank or thread (MPI
// requests, pipeline receives, checkpoint collectives, the checksum worker) goes through
// poll_until or wait_cv, so that
//  - a waiting rank gives its core away: MPI's own blocking calls spin at 100% CPU, which
//    starves a peer sharing the core and burns a node while a stopped rank is waited for;
//  - one hook sees every wait that lasts long, which the watchdog uses to bound it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace gpt {

using WaitClock = std::chrono::steady_clock;

// Called about once per second of an unfinished wait with what is waited for and the
// seconds waited so far. It may throw (e.g. CommError) to end the wait; it runs on the
// waiting thread. Empty (the default): waits are unbounded.
using WaitHook = std::function<void(const char* what, double waited_s)>;
void set_wait_hook(WaitHook hook);
void call_wait_hook(const char* what, double waited_s);

// Calls done() until it returns true. Spins for the first microseconds (a fast collective
// completes there), then yields, then sleeps in steps growing to 1 ms, so a long wait costs
// almost no CPU and at most 1 ms of latency. Returns false if `deadline` passed first.
bool poll_until(const std::function<bool()>& done, const char* what,
                WaitClock::time_point deadline = WaitClock::time_point::max());

// Waits on a condition variable for pred() in one-second slices, reporting each slice to
// the wait hook; the lock is held on return, as with cv.wait(lock, pred).
template <typename Cv, typename Lock, typename Pred>
void wait_cv(Cv& cv, Lock& lock, Pred pred, const char* what) {
    const auto start = WaitClock::now();
    while (!cv.wait_for(lock, std::chrono::seconds(1), pred))
        call_wait_hook(what, std::chrono::duration<double>(WaitClock::now() - start).count());
}

}  // namespace gpt
