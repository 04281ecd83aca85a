#include "dist/mpi_environment.hpp"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>

#include "core/errors.hpp"
#include "dist/fatal.hpp"

namespace gpt::dist {

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        GPT_THROW(CommError, "MPI_Init_thread failed");
    // Errors come back as codes that we turn into CommError, instead of MPI aborting
    // without a message.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    open_fatal_channel();
}

MpiEnvironment::~MpiEnvironment() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
        close_fatal_channel();
        MPI_Finalize();
    }
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
