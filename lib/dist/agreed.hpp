// A start-up check that every rank runs and that may fail on some ranks only (a folder on a
// node-local disk, a full file system seen from one node): the ranks must agree, or the
// ranks that passed would wait forever in the next collective for the ranks that failed.
#pragma once

#include <mpi.h>

#include <functional>

namespace gpt::dist {

// Runs check() on every rank of `comm`; if it threw a gpt::Error on any rank, every rank
// throws the same error (UsageError stays UsageError, anything else becomes IoError) with
// the message of the lowest failing rank (naming that rank when it is not rank 0), so that
// rank 0 reports it once and every rank exits alike. Collective.
void run_agreed(MPI_Comm comm, const std::function<void()>& check);

}  // namespace gpt::dist
