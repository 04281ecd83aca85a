#include "dist/mpi_environment.hpp"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/errors.hpp"
#include "core/wait.hpp"
#include "core/watchdog_deadline.hpp"
#include "dist/fatal.hpp"

namespace gpt::dist {

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
    int provided = 0;
    {
        // MPI_Init waits for every rank's PMI exchange and cannot be polled: a rank that
        // never starts must not hold the others here past the watchdog's limit.
        watchdog::BlockedScope blocked("MPI_Init_thread");
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            GPT_THROW(CommError, "MPI_Init_thread failed");
    }
    // Errors come back as codes that we turn into CommError, instead of MPI aborting
    // without a message.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    watchdog::BlockedScope blocked("opening the fatal-error channel (MPI_Comm_dup, MPI_Win_allocate)");
    open_fatal_channel();
}

namespace {
// How long MPI_Finalize may take once every rank passed the final barrier. Debian's MPICH
// 4.0.2 over UCX's TCP transport sometimes never returns from it with 2+ ranks per node
// (tests/slurm: 2-4 of 10 runs; one rank waits in UCX for an endpoint flush that a peer
// already blocked in the PMI barrier never acknowledges). By then every file is closed
// and fsynced and the checkpoint published, so ending the process loses nothing: the
// monitor logs one line and _exits with the job's own code. A normal finalize takes well
// under a second even on a loaded node.
constexpr double kFinalizeGrace = 10.0;
constexpr char kFinalizeNote[] =
    "MPI_Finalize did not return within 10 s of the final barrier (all files closed, "
    "checkpoints durable): ending the process without it (MPICH over UCX's TCP transport can "
    "hang there, README 'Two nodes')";
}  // namespace

MpiEnvironment::~MpiEnvironment() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    {
        watchdog::BlockedScope blocked("freeing the fatal-error channel (MPI_Win_free)");
        close_fatal_channel();
    }
    // Every rank gets here only after closing its files; the barrier is polled, so the
    // watchdog bounds it like any other wait.
    MPI_Request barrier = MPI_REQUEST_NULL;
    if (MPI_Ibarrier(MPI_COMM_WORLD, &barrier) == MPI_SUCCESS) {
        poll_until(
            [&] {
                int flag = 0;
                return MPI_Test(&barrier, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag != 0;
            },
            "the final barrier before MPI_Finalize");
    }
    watchdog::BlockedScope blocked("MPI_Finalize", kFinalizeGrace, kFinalizeNote, exit_code_);
    MPI_Finalize();
}

namespace {
int g_abort_code = 1;
extern "C" void exit_now() { std::_Exit(g_abort_code); }
}  // namespace

void abort_all(int code) {
    // MPI_Abort ends in exit(), which runs every library's atexit handler in whatever state
    // the failure left it: HDF5's then closes a file whose write just failed (full disk)
    // and crashes with SIGSEGV, replacing this exit code. A handler registered now runs
    // first and ends the process at once; a failed save's files are temporaries anyway.
    std::fflush(nullptr);
    g_abort_code = code;
    std::atexit(exit_now);
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
}

}  // namespace gpt::dist
