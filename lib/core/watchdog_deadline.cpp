#include "core/watchdog_deadline.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <mutex>
#include <thread>

#include "core/watchdog.hpp"

namespace gpt::watchdog {

using Clock = std::chrono::steady_clock;

struct BlockedScope::Entry {
    const char* op;
    Clock::time_point since;
    double own_limit_s;       // < 0: the armed limit
    const char* message;      // own report, or nullptr: blocked_report()
    int exit_code;
    std::string context;      // captured at entry, on the blocked thread
};

namespace {

// Everything the monitor shares with the blocked threads, behind one mutex. Leaked on
// purpose (never destroyed): a scope may still close during static destruction.
struct Monitor {
    std::mutex mu;
    std::condition_variable cv;
    std::list<BlockedScope::Entry*> active;
    bool stop = false;
    double timeout_s = 0;
    std::string limit;
    DeadlineAction action;
    std::thread thread;
};
Monitor& monitor() {
    static Monitor* m = new Monitor;
    return *m;
}
// Only the first expiry acts, whichever thread sees it.
std::atomic<bool> g_fired{false};

double limit_of(const Monitor& m, const BlockedScope::Entry& e) {
    return e.own_limit_s >= 0 ? e.own_limit_s : m.timeout_s;
}

// What the blocked thread was doing, from its watchdog record.
std::string capture_context() {
    std::string s;
    if (const Op* cur = current()) s += " during " + describe(*cur);
    s += "; last completed: ";
    s += last_completed() ? describe(*last_completed()) : std::string("none");
    return s;
}

void run_monitor() {
    Monitor& m = monitor();
    std::unique_lock<std::mutex> lock(m.mu);
    while (!m.stop) {
        // Sleep until the earliest deadline (at most a second, so re-arming is seen).
        auto wake = Clock::now() + std::chrono::seconds(1);
        const BlockedScope::Entry* expired = nullptr;
        const auto now = Clock::now();
        for (const BlockedScope::Entry* e : m.active) {
            const auto end = e->since + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(limit_of(m, *e)));
            if (end <= now) {
                expired = e;
                break;
            }
            if (end < wake) wake = end;
        }
        if (!expired) {
            m.cv.wait_until(lock, wake);
            continue;
        }
        if (g_fired.exchange(true)) return;
        const double waited = std::chrono::duration<double>(now - expired->since).count();
        const std::string line = expired->message
                                     ? std::string(expired->message)
                                     : blocked_report(expired->op, waited, m.timeout_s, m.limit, expired->context);
        const int code = expired->exit_code;
        const DeadlineAction action = m.action;
        lock.unlock();
        if (action) action(line, code);
        std::fprintf(stderr, "%s\n", line.c_str());
        std::_Exit(code);
    }
}

}  // namespace

std::string blocked_report(const char* op, double waited_s, double timeout_s, const std::string& limit,
                           const std::string& context) {
    char buf[64];
    std::string s = "hang: blocked ";
    std::snprintf(buf, sizeof buf, "%.0f s", waited_s);
    s += buf;
    std::snprintf(buf, sizeof buf, "%g s", timeout_s);
    s += std::string(" (limit ") + buf + ", " + limit + ") inside " + (op ? op : "a library call");
    s += ", a call the watchdog cannot poll";
    s += context;
    return s;
}

void arm_deadlines(double timeout_s, const std::string& limit, DeadlineAction on_expiry) {
    Monitor& m = monitor();
    std::lock_guard<std::mutex> g(m.mu);
    m.timeout_s = timeout_s;
    m.limit = limit;
    m.action = std::move(on_expiry);
    m.stop = false;
    if (!m.thread.joinable()) m.thread = std::thread(run_monitor);
    m.cv.notify_all();
}

void disarm_deadlines() {
    Monitor& m = monitor();
    std::thread t;
    {
        std::lock_guard<std::mutex> g(m.mu);
        m.stop = true;
        t = std::move(m.thread);
        m.cv.notify_all();
    }
    if (t.joinable()) t.join();
}

BlockedScope::BlockedScope(const char* op) : BlockedScope(op, -1.0, nullptr, 3) {}

BlockedScope::BlockedScope(const char* op, double limit_s, const char* message, int exit_code)
    : entry_(new Entry{op, Clock::now(), limit_s, message, exit_code, capture_context()}) {
    Monitor& m = monitor();
    std::lock_guard<std::mutex> g(m.mu);
    m.active.push_back(entry_);
    m.cv.notify_all();
}

BlockedScope::~BlockedScope() {
    Monitor& m = monitor();
    {
        std::lock_guard<std::mutex> g(m.mu);
        m.active.remove(entry_);
    }
    delete entry_;
}

}  // namespace gpt::watchdog
