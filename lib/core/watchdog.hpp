// The hang watchdog: no wait for another rank, thread or the device lasts longer than
// --distributed-timeout-minutes (Megatron's flag; GPT_DISTRIBUTED_TIMEOUT_SECONDS in
// core/environment.hpp overrides it for tests).
//
// Every such wait goes through gpt::poll_until / gpt::wait_cv (core/wait.hpp), which call
// the wait hook about once per second of a wait; install() sets that hook. When one wait
// passes the limit, the hook builds one line saying what this thread was waiting for and
// what it last completed, and hands it to the action the main installed (gpt_pretrain:
// dist::fail_job with kHangExit), which ends the job.
//
// "What it was waiting for" comes from a per-thread record: the communicator, the
// checkpoint collectives and the CUDA backend open an OpScope around each wait (operation,
// group, peers, bytes); the trainer and the pipeline executor set the iteration and
// micro-batch. A scope that ends normally becomes the thread's last completed operation.
// Recording costs a few stores: no allocation, no lock.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace gpt::watchdog {

// A process group as reports name it. Interned: the record lives until the process ends,
// because a thread's last completed operation outlives the communicator that recorded it
// (a report or BlockedScope after the groups were rebuilt read the old communicator's freed
// name). Equal names and members share one record, so rebuilding groups adds nothing.
struct Group {
    std::string name;
    std::vector<int> ranks;  // world ranks, in the group's order
    // No <=>: CUDA sources include this header as C++17.
    friend bool operator<(const Group& a, const Group& b) { return std::tie(a.name, a.ranks) < std::tie(b.name, b.ranks); }
};
const Group& intern_group(const std::string& name, const std::vector<int>& world_ranks);

// What a thread waits in. The strings are literals or interned groups (intern_group), so
// copying an Op copies pointers only, and a record stays readable however long it is kept.
struct Op {
    const char* name = nullptr;    // "all-reduce", "recv", "device synchronize", ...
    const char* group = nullptr;   // process group ("dp", "pp", ...): an interned Group's name; nullptr: none
    const int* ranks = nullptr;    // that Group's ranks (world ranks); nullptr: unknown
    int nranks = 0;                // the group's size (also when ranks is unknown)
    int peer = -1;                 // world rank of the point-to-point peer; -1: collective
    std::int64_t bytes = -1;       // this rank's payload; -1: unknown
    std::int64_t iteration = -1;   // filled in by OpScope from set_iteration
    int micro_batch = -1;          // filled in by OpScope from set_micro_batch
};

// Makes `op` this thread's current operation for the scope's lifetime (nested scopes
// restore the outer one). Leaving it normally records it as the last completed operation;
// leaving it by an exception does not (it did not complete).
class OpScope {
public:
    explicit OpScope(const Op& op);
    ~OpScope();
    OpScope(const OpScope&) = delete;
    OpScope& operator=(const OpScope&) = delete;

private:
    Op saved_;
    bool had_saved_;
    int uncaught_;
};

// Names a wait by its label (`what` of poll_until) for the report, unless a caller further
// out recorded more (a communicator's OpScope with group, peer and bytes).
class LabelScope {
public:
    explicit LabelScope(const char* what);
    LabelScope(const LabelScope&) = delete;
    LabelScope& operator=(const LabelScope&) = delete;

private:
    std::optional<OpScope> scope_;
};

// The training position, shared by the threads of the process (the main thread sets it).
// -1: not inside an iteration / outside the pipeline schedule.
void set_iteration(std::int64_t iteration);
void set_micro_batch(int micro_batch);

// This thread's record, for the report and for tests: nullptr when there is none.
const Op* current();
const Op* last_completed();
// Forgets this thread's record (tests).
void reset_thread();

// "recv of 4096 bytes from rank 2 on group 'pp' (ranks 0,1,2,3) at iteration 3, micro-batch 1"
std::string describe(const Op& op);
// An Op on `group`: name, group, ranks and nranks set.
Op on_group(const char* name, const Group& group);

// The line the watchdog reports for a wait named `what` (the wait's own label) that has
// lasted `waited_s`, with this thread's record. `limit` says where the limit came from.
std::string report(const char* what, double waited_s, double timeout_s, const std::string& limit);

// What the hook does once a wait passes the limit; it must not return (fail_job), or
// throw to end the wait (tests).
using HangAction = std::function<void(const std::string& line)>;

// Sets gpt's wait hook: a wait of more than timeout_s seconds calls on_hang with report().
// While on_hang runs on a thread, that thread's own waits (fail_job's bounded claim) are
// not watched, so the report cannot recurse.
void install(double timeout_s, const std::string& limit, HangAction on_hang);
// Removes the hook: waits are unbounded again.
void uninstall();

}  // namespace gpt::watchdog
