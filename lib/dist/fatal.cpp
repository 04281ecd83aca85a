#include "dist/fatal.hpp"

#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "core/fd_write.hpp"
#include "core/wait.hpp"
#include "dist/mpi_environment.hpp"
#include "log/log.hpp"
#include "log/rank_file.hpp"

namespace gpt::dist {

namespace {

struct Channel {
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Win win = MPI_WIN_NULL;
    int* slot = nullptr;  // on rank 0: how many ranks have claimed so far
    bool open = false;
};
Channel g_channel;
// This rank and the world's size, for end_rank_now, which must not call MPI; -1: unknown.
std::atomic<int> g_rank{-1}, g_size{-1};

int env_int(const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? std::atoi(v) : -1;
}

bool mpi_running() {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    return initialized && !finalized;
}

// How long a failing rank waits for rank 0's counter: long enough for a loaded node,
// short enough that a stopped rank 0 delays the report only a little.
constexpr auto kClaimTimeout = std::chrono::seconds(2);
// How long the reporter leaves the launcher to forward its line before the abort kills the
// job: the pipe to mpiexec is drained asynchronously.
constexpr auto kForwardPause = std::chrono::milliseconds(500);
// How long a silent failing rank waits for the reporter's abort before aborting itself.
constexpr auto kAwaitAbort = std::chrono::seconds(20);

// Returns the number of ranks that claimed before this one (0: this rank reports), or -1
// when the claim did not complete in time.
int claim() {
    if (!g_channel.open) return 0;
    int one = 1, before = -1;
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Rget_accumulate(&one, 1, MPI_INT, &before, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_SUM,
                            g_channel.win, &req) != MPI_SUCCESS)
        return -1;
    int rc = MPI_SUCCESS;
    const bool done = poll_until(
        [&] {
            int flag = 0;
            rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
            return rc != MPI_SUCCESS || flag != 0;
        },
        "the fatal-error claim", WaitClock::now() + kClaimTimeout);
    if (!done || rc != MPI_SUCCESS) return -1;
    return before;
}

// <log-dir>/exit-code-rank-R: the code this rank ends with, then its line. The launcher's
// own code often hides it: srun --kill-on-bad-exit reports the other tasks' signal (143,
// or 137 after MPI_Abort), and a step with a node that cannot be reached never ends by
// itself. slurm/run-training.sh reads these files to tell a hang the watchdog ended (3)
// from a configuration error (2), and to end a step whose rank gave up on a hang. Written
// once per failing rank (a handful of files), fsynced like the rank file; never throws.
void write_exit_code(int rank, int code, const std::string& line) {
    const std::string file = log::rank_file();
    const auto slash = file.rfind('/');
    if (file.empty() || slash == std::string::npos) return;
    const std::string path = file.substr(0, slash) + "/exit-code-rank-" + std::to_string(rank);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    const std::string text = std::to_string(code) + "\n" + line;
    write_fully(fd, text.data(), text.size());
    ::fsync(fd);
    ::close(fd);
}

}  // namespace

void open_fatal_channel() {
    if (g_channel.open || !mpi_running()) return;
    int rank = 0;
    MPI_Comm_dup(MPI_COMM_WORLD, &g_channel.comm);
    MPI_Comm_set_errhandler(g_channel.comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g_channel.comm, &rank);
    int size = 1;
    MPI_Comm_size(g_channel.comm, &size);
    g_rank = rank;
    g_size = size;
    const MPI_Aint bytes = rank == 0 ? static_cast<MPI_Aint>(sizeof(int)) : 0;
    if (MPI_Win_allocate(bytes, sizeof(int), MPI_INFO_NULL, g_channel.comm, &g_channel.slot,
                         &g_channel.win) != MPI_SUCCESS)
        return;  // no channel: every failing rank reports itself, as before
    MPI_Win_set_errhandler(g_channel.win, MPI_ERRORS_RETURN);
    // The counter starts at 0 and is public before any rank may claim: a fence epoch
    // around the local store, then one passive epoch for the rest of the run.
    MPI_Win_fence(0, g_channel.win);
    if (rank == 0) *g_channel.slot = 0;
    MPI_Win_fence(MPI_MODE_NOSUCCEED, g_channel.win);
    MPI_Win_lock_all(MPI_MODE_NOCHECK, g_channel.win);
    g_channel.open = true;
}

void close_fatal_channel() {
    if (!g_channel.open || !mpi_running()) return;
    MPI_Win_unlock_all(g_channel.win);
    MPI_Win_free(&g_channel.win);
    MPI_Comm_free(&g_channel.comm);
    g_channel = Channel{};
}

bool report_failure(const char* program, const std::string& message) {
    int rank = 0, size = 1;
    if (mpi_running()) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
    }
    std::string line = std::string(program) + ": error";
    if (size > 1) line += " on rank " + std::to_string(rank);
    line += ": " + message + "\n";
    // Whatever the logging core still holds goes out first, then the reason, on disk
    // before anything can kill this process.
    std::cout.flush();
    log::flush();
    log::append_to_rank_file("[rank " + std::to_string(rank) + "] fatal: " + line);
    const int before = size > 1 ? claim() : 0;
    if (before > 0) return false;  // another rank reports; our reason is in our log file
    write_fully(STDERR_FILENO, line.data(), line.size());
    return true;
}

void end_rank_now(const char* program, const std::string& message, int code) {
    int rank = g_rank.load(), size = g_size.load();
    // Before MPI_Init returned: Hydra sets PMI_RANK/PMI_SIZE, srun SLURM_PROCID/SLURM_NTASKS.
    if (rank < 0) rank = env_int("PMI_RANK") >= 0 ? env_int("PMI_RANK") : env_int("SLURM_PROCID");
    if (size < 0) size = env_int("PMI_SIZE") >= 0 ? env_int("PMI_SIZE") : env_int("SLURM_NTASKS");
    std::string line = std::string(program) + (code == 0 ? ": note" : ": error");
    if (size > 1 && rank >= 0) line += " on rank " + std::to_string(rank);
    line += ": " + message + "\n";
    log::append_to_rank_file("[rank " + std::to_string(rank) + "] " + (code == 0 ? "note: " : "fatal: ") + line);
    if (code != 0) write_exit_code(rank, code, line);
    write_fully(STDERR_FILENO, line.data(), line.size());
    ::_exit(code);
}

void fail_job(const char* program, const std::string& message, int code) {
    {
        int rank = g_rank.load();
        if (rank < 0 && mpi_running()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        write_exit_code(rank < 0 ? 0 : rank, code, std::string(program) + ": " + message + "\n");
    }
    const bool reporter = report_failure(program, message);
    if (reporter) {
        int size = 1;
        if (mpi_running()) MPI_Comm_size(MPI_COMM_WORLD, &size);
        if (size > 1) std::this_thread::sleep_for(kForwardPause);
    } else {
        std::this_thread::sleep_for(kAwaitAbort);
    }
    abort_all(code);
}

}  // namespace gpt::dist
