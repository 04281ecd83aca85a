// Communicator over an MPI communicator, for host buffers.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/watchdog.hpp"
#include "dist/communicator.hpp"

namespace gpt::dist {

// Completes `req` through gpt::poll_until, the project's one blocking wait (it yields the
// core and reports long waits to the wait hook); `what` names the wait for that hook.
// Returns MPI's error code. Every MPI wait of the project goes through here: MPI's own
// blocking calls spin at 100% CPU, and a stopped peer would keep them spinning forever.
int wait_request(MPI_Request& req, const char* what);

// The members of `comm` as MPI_COMM_WORLD ranks, in comm's order: the numbers the user
// sees, for the watchdog's report.
std::vector<int> world_ranks_of(MPI_Comm comm);

class MpiCommunicator final : public Communicator {
public:
    // Takes ownership of `comm` (freed in the destructor) unless it is MPI_COMM_WORLD.
    MpiCommunicator(MPI_Comm comm, std::string name);
    ~MpiCommunicator() override;

    const std::string& name() const override { return name_; }
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    MPI_Comm comm() const { return comm_; }

    void all_reduce(void* buf, std::int64_t count, CommType t, ReduceOp op) override;
    void all_gather(const void* send, void* recv, std::int64_t count, CommType t) override;
    void reduce_scatter(const void* send, void* recv, std::int64_t count, CommType t,
                        ReduceOp op) override;
    void broadcast(void* buf, std::int64_t count, CommType t, int root) override;
    void send(const void* buf, std::int64_t count, CommType t, int peer, int tag) override;
    void recv(void* buf, std::int64_t count, CommType t, int peer, int tag) override;
    std::unique_ptr<PendingOp> isend(const void* buf, std::int64_t count, CommType t, int peer,
                                       int tag) override;
    void barrier() override;
    std::unique_ptr<PendingOp> iall_reduce(void* buf, std::int64_t count, CommType t,
                                           ReduceOp op) override;
    std::unique_ptr<PendingOp> ireduce_scatter_v(const void* send, void* recv,
                                                 std::vector<std::int64_t> counts, CommType t,
                                                 ReduceOp op) override;

    // Completes req; the watchdog's record (core/watchdog.hpp) names `what` on this group
    // with `bytes` of payload and, for point-to-point, the peer (group rank; -1: none).
    void wait(MPI_Request& req, const char* what, std::int64_t bytes = -1, int peer = -1);
    bool test(MPI_Request& req, const char* what);  // true when complete

private:
    std::vector<int> world_ranks_;  // the group's members as MPI_COMM_WORLD ranks
    const watchdog::Group* watched_ = nullptr;  // this group in the watchdog's records

    MPI_Comm comm_;
    std::string name_;
    int rank_ = 0;
    int size_ = 1;
};

}  // namespace gpt::dist
