#include "dist/agreed.hpp"

#include <climits>
#include <string>

#include "core/errors.hpp"
#include "dist/comm_mpi.hpp"

namespace gpt::dist {

namespace {
void wait_or_throw(MPI_Request& req, int rc) {
    if (rc != MPI_SUCCESS || wait_request(req, "a start-up check's agreement") != MPI_SUCCESS)
        GPT_THROW(CommError, "agreeing on a start-up check failed");
}
}  // namespace

void run_agreed(MPI_Comm comm, const std::function<void()>& check) {
    std::string message;
    int usage = 0;
    try {
        check();
    } catch (const UsageError& e) {
        message = e.what();
        usage = 1;
    } catch (const Error& e) {
        message = e.what();
    }
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    const bool failed = !message.empty();
    int mine = failed ? rank : INT_MAX, first = INT_MAX;
    MPI_Request req = MPI_REQUEST_NULL;
    wait_or_throw(req, MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm, &req));
    if (first == INT_MAX) return;
    int header[2] = {static_cast<int>(message.size()), usage};
    wait_or_throw(req, MPI_Ibcast(header, 2, MPI_INT, first, comm, &req));
    message.resize(static_cast<std::size_t>(header[0]));
    wait_or_throw(req, MPI_Ibcast(message.data(), header[0], MPI_CHAR, first, comm, &req));
    if (first != 0) message += " (on rank " + std::to_string(first) + ")";
    if (header[1]) throw UsageError(message);
    throw IoError(message);
}

}  // namespace gpt::dist
