// MPI start-up and shut-down as RAII, and the abort that keeps a failed rank from leaving
// the others waiting until the job's time limit.
#pragma once

namespace gpt::dist {

class MpiEnvironment {
public:
    MpiEnvironment(int* argc, char*** argv);  // MPI_Init_thread(FUNNELED)
    // The final barrier, then MPI_Finalize bounded by kFinalizeGrace (mpi_environment.cpp).
    ~MpiEnvironment();
    MpiEnvironment(const MpiEnvironment&) = delete;
    MpiEnvironment& operator=(const MpiEnvironment&) = delete;

    int rank() const { return rank_; }
    int size() const { return size_; }
    // The process's exit code, for a finalize that has to be cut short (main's return value).
    void set_exit_code(int code) { exit_code_ = code; }

private:
    int rank_ = 0;
    int size_ = 1;
    int exit_code_ = 0;
};

// Terminates every rank of MPI_COMM_WORLD with `code`; never returns. The libraries' atexit
// handlers do not run on this path (HDF5's crashes on a file whose write failed).
[[noreturn]] void abort_all(int code);

}  // namespace gpt::dist
