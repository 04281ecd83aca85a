#include "dist/mpi_environment.hpp"

#include <mpi.h>

#include <cstdlib>

#include "core/errors.hpp"

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
}

MpiEnvironment::~MpiEnvironment() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

void abort_all(int code) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
}

}  // namespace gpt::dist
