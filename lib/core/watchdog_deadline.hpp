// Deadlines for the waits the watchdog cannot poll.
//
// core/watchdog.hpp bounds every wait that goes through poll_until / wait_cv: the waiting
// thread itself notices the limit. Some calls block inside a library instead and never
// come back to us while they wait: MPI_Init, communicator creation (MPI_Comm_split/dup),
// MPI_Finalize, and the collectives HDF5 runs on its own (H5Pset_fapl_mpio's MPI_Comm_dup;
// H5Fcreate, H5Fopen and H5Fclose with the MPI-IO driver: collective metadata reads and
// writes, the file's collective open/close). For those a BlockedScope records "this thread is blocked in <op> since t",
// and a monitor thread, started by arm_deadlines, ends the process once a scope outlives
// its limit: it builds one line in the watchdog's format and hands it to the action the
// main installed (gpt_pretrain: dist::end_rank_now, which writes the rank's log file and
// stderr and _exits with the watchdog's code 3).
//
// The action runs on the monitor thread while the blocked thread is still inside the
// library, so it must not call MPI (MPI_THREAD_FUNNELED) nor anything that could wait for
// the blocked thread. Only the first expiry acts; a later one on another thread waits for
// the process to end. Entering and leaving a scope takes a mutex: these calls are rare
// (start-up, shut-down, once per checkpoint file).
#pragma once

#include <functional>
#include <string>

namespace gpt::watchdog {

// Ends the process after a scope passed its limit: writes `line`, exits with `exit_code`.
// Runs on the monitor thread; must not return (if it does, the monitor _Exits).
using DeadlineAction = std::function<void(const std::string& line, int exit_code)>;

// Starts the monitor (or re-arms a running one): scopes without their own limit may last
// timeout_s seconds; `limit` says where that number came from, as in install().
// Scopes opened before arming count from when they were opened.
void arm_deadlines(double timeout_s, const std::string& limit, DeadlineAction on_expiry);
// Stops and joins the monitor: scopes are unbounded again (tests, and the end of main).
void disarm_deadlines();

// While it lives, this thread is blocked in `op` (a literal: "MPI_Finalize",
// "H5Fclose of the checkpoint file"). What this thread was doing (core/watchdog.hpp's
// record: the enclosing operation, the last completed one, the iteration) is captured at
// entry, for the report.
class BlockedScope {
public:
    explicit BlockedScope(const char* op);
    // A scope with its own limit, report and exit code, independent of arm_deadlines' limit
    // (the monitor still has to be armed): past limit_s the action gets `message` verbatim
    // and `exit_code` (MPI_Finalize after every file is closed: exit 0, see mpi_environment.cpp).
    BlockedScope(const char* op, double limit_s, const char* message, int exit_code);
    ~BlockedScope();
    BlockedScope(const BlockedScope&) = delete;
    BlockedScope& operator=(const BlockedScope&) = delete;

    struct Entry;

private:
    Entry* entry_;
};

// The line the monitor reports for a scope blocked in `op` for waited_s; `context` is what
// the scope captured ("; last completed: ..."). Exposed for tests.
std::string blocked_report(const char* op, double waited_s, double timeout_s, const std::string& limit,
                           const std::string& context);

}  // namespace gpt::watchdog
