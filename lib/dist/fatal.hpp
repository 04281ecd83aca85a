// The end of a job that failed: the reason reaches the user, once, and every rank stops.
//
// mpiexec forwards a rank's stderr through a pipe and kills the job as soon as one rank
// calls MPI_Abort, so text written in pieces, or just before the abort, is often lost; and
// when every rank meets the same error (a damaged checkpoint, a full disk) sixteen copies of
// it bury the one line that matters. fail_job therefore
//  1. appends the message to the rank's --log-dir file (one write, fsynced);
//  2. lets the failing ranks agree who reports: the first to claim a counter on rank 0's
//     fatal window (MPI one-sided, so ranks still busy elsewhere need not take part);
//  3. the reporter writes one line to stderr in a single write(2), waits a moment for the
//     launcher to forward it and calls abort_all (MPI_Abort without the libraries' exit
//     handlers, see mpi_environment.hpp); the other failing ranks stay silent on stderr and wait to be taken
//     down by that abort (they abort themselves if it does not come).
// If the claim cannot complete (rank 0 stopped or gone), the rank reports itself.
// fail_job and end_rank_now (code != 0) also leave <log-dir>/exit-code-rank-R (the code, then
// the line) for the job script: the launcher's own exit code does not carry ours (fatal.cpp).
#pragma once

#include <string>

namespace gpt::dist {

// Opens the fatal channel (a communicator and a one-int window on rank 0). Collective over
// MPI_COMM_WORLD; MpiEnvironment calls it after MPI_Init.
void open_fatal_channel();
// Frees it before MPI_Finalize; collective. MpiEnvironment's destructor calls it.
void close_fatal_channel();

// Reports `message` as "<program>: error on rank R: <message>" (or "<program>: error: ..."
// in a 1-rank job) and terminates every rank with `code`. Never returns.
[[noreturn]] void fail_job(const char* program, const std::string& message, int code);

// Ends this rank at once from a thread that must not call MPI (the deadline monitor of
// core/watchdog_deadline.hpp, while the main thread is blocked inside MPI or HDF5): the
// line, formatted as fail_job's (code 0: "<program>: note on rank R: ..."), goes to the
// rank's --log-dir file and to stderr in one write each, then _exit(code). No claim and
// no MPI_Abort: every rank whose deadline passes reports itself, and the launcher (srun
// --kill-on-bad-exit, Hydra) ends the other ranks when one exits with a non-zero code.
// The rank comes from MPI once known, else from the launcher's environment.
[[noreturn]] void end_rank_now(const char* program, const std::string& message, int code);

// The reporting part of fail_job without the abort, for tests: returns true when this rank
// won the claim (or could not reach rank 0) and wrote the line to stderr.
bool report_failure(const char* program, const std::string& message);

}  // namespace gpt::dist
