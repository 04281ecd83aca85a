#include "core/watchdog.hpp"

#include <atomic>
#include <cstdio>
#include <exception>
#include <mutex>
#include <set>

#include "core/wait.hpp"

namespace gpt::watchdog {

namespace {

thread_local Op t_current;
thread_local bool t_has_current = false;
thread_local Op t_last;
thread_local bool t_has_last = false;
// Set while this thread runs the hang action: its own bounded waits are not watched.
thread_local bool t_reporting = false;

std::atomic<std::int64_t> g_iteration{-1};
std::atomic<int> g_micro_batch{-1};

// Groups as large as the world would make the line unreadable; the first ones and the
// count say enough (the report of a point-to-point wait names its peer separately).
constexpr int kRanksListed = 16;

void append_ranks(std::string& s, const Op& op) {
    if (!op.ranks) {
        if (op.nranks > 0) s += " (" + std::to_string(op.nranks) + " ranks)";
        return;
    }
    s += " (ranks ";
    for (int i = 0; i < op.nranks && i < kRanksListed; ++i) {
        if (i) s += ",";
        s += std::to_string(op.ranks[i]);
    }
    if (op.nranks > kRanksListed) s += ",... " + std::to_string(op.nranks) + " ranks";
    s += ")";
}

}  // namespace

OpScope::OpScope(const Op& op)
    : saved_(t_current), had_saved_(t_has_current), uncaught_(std::uncaught_exceptions()) {
    t_current = op;
    t_current.iteration = g_iteration.load(std::memory_order_relaxed);
    t_current.micro_batch = g_micro_batch.load(std::memory_order_relaxed);
    t_has_current = true;
}

OpScope::~OpScope() {
    if (std::uncaught_exceptions() == uncaught_) {
        t_last = t_current;
        t_has_last = true;
    }
    t_current = saved_;
    t_has_current = had_saved_;
}

LabelScope::LabelScope(const char* what) {
    if (t_has_current) return;
    Op op;
    op.name = what;
    scope_.emplace(op);
}

void set_iteration(std::int64_t iteration) { g_iteration.store(iteration, std::memory_order_relaxed); }
void set_micro_batch(int micro_batch) { g_micro_batch.store(micro_batch, std::memory_order_relaxed); }

const Op* current() { return t_has_current ? &t_current : nullptr; }
const Op* last_completed() { return t_has_last ? &t_last : nullptr; }

void reset_thread() {
    t_has_current = t_has_last = false;
    t_current = t_last = Op{};
}

const Group& intern_group(const std::string& name, const std::vector<int>& world_ranks) {
    // Leaked on purpose: records are read until the process ends, even by exit paths.
    static std::mutex* mu = new std::mutex;
    static std::set<Group>* groups = new std::set<Group>;
    std::lock_guard<std::mutex> g(*mu);
    return *groups->insert(Group{name, world_ranks}).first;
}

Op on_group(const char* name, const Group& group) {
    Op op;
    op.name = name;
    op.group = group.name.c_str();
    op.ranks = group.ranks.data();
    op.nranks = static_cast<int>(group.ranks.size());
    return op;
}

std::string describe(const Op& op) {
    std::string s = op.name ? op.name : "an operation";
    if (op.bytes >= 0) s += " of " + std::to_string(op.bytes) + " bytes";
    if (op.peer >= 0) {
        // A receive waits for its peer to send; anything else goes to the peer.
        const bool from = s.rfind("recv", 0) == 0;
        s += (from ? " from rank " : " to rank ") + std::to_string(op.peer);
    }
    if (op.group) {
        s += std::string(" on group '") + op.group + "'";
        append_ranks(s, op);
    } else if (op.nranks > 0) {
        s += " over";
        append_ranks(s, op);
    }
    if (op.iteration >= 0) s += " at iteration " + std::to_string(op.iteration);
    if (op.micro_batch >= 0) s += (op.iteration >= 0 ? ", micro-batch " : " at micro-batch ") + std::to_string(op.micro_batch);
    return s;
}

std::string report(const char* what, double waited_s, double timeout_s, const std::string& limit) {
    char secs[64];
    std::snprintf(secs, sizeof secs, "%.0f s", waited_s);
    std::string s = "hang: waited ";
    s += secs;
    std::snprintf(secs, sizeof secs, "%g s", timeout_s);
    s += std::string(" (limit ") + secs + ", " + limit + ") for ";
    if (const Op* op = current()) {
        s += describe(*op);
    } else {
        s += what ? what : "an unnamed wait";
        const std::int64_t it = g_iteration.load(std::memory_order_relaxed);
        if (it >= 0) s += " at iteration " + std::to_string(it);
    }
    s += "; last completed: ";
    s += last_completed() ? describe(*last_completed()) : std::string("none");
    return s;
}

void install(double timeout_s, const std::string& limit, HangAction on_hang) {
    set_wait_hook([timeout_s, limit, on_hang = std::move(on_hang)](const char* what, double waited_s) {
        if (t_reporting || waited_s < timeout_s) return;
        t_reporting = true;
        // The action ends the job (fail_job) or, in tests, throws to end the wait.
        struct Reset {
            ~Reset() { t_reporting = false; }
        } reset;
        on_hang(report(what, waited_s, timeout_s, limit));
    });
}

void uninstall() { set_wait_hook({}); }

}  // namespace gpt::watchdog
