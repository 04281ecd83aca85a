#include "dist/comm_mpi.hpp"

#include <sched.h>

#include <climits>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/errors.hpp"
#include "core/wait.hpp"
#include "core/watchdog.hpp"
#include "dist/mpi_reduce_ops.hpp"

namespace gpt::dist {

namespace {

void check(int rc, const char* what, const std::string& group) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    GPT_THROW(CommError, what, " on group '", group, "' failed: ", std::string(msg, len));
}

int checked_count(std::int64_t count) {
    // MPI-3 counts are int; larger messages would need the _c variants of MPI-4.
    GPT_REQUIRE(count >= 0 && count <= INT_MAX, CommError, "message of ", count,
                " elements exceeds MPI's int count limit");
    return static_cast<int>(count);
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name)
    : comm_(comm), name_(std::move(name)) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    world_ranks_ = world_ranks_of(comm_);
    watched_ = &watchdog::intern_group(name_, world_ranks_);
}

std::vector<int> world_ranks_of(MPI_Comm comm) {
    int size = 0;
    MPI_Comm_size(comm, &size);
    std::vector<int> mine(static_cast<std::size_t>(size)), world_ranks(mine.size());
    for (int r = 0; r < size; ++r) mine[static_cast<std::size_t>(r)] = r;
    MPI_Group group, world;
    MPI_Comm_group(comm, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_translate_ranks(group, size, mine.data(), world, world_ranks.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    return world_ranks;
}

MpiCommunicator::~MpiCommunicator() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

int wait_request(MPI_Request& req, const char* what) {
    // Callers without a communicator (start-up agreements, the index broadcast) are named
    // by their label; a caller that recorded more (MpiCommunicator::wait) keeps its record.
    watchdog::LabelScope label(what);
    int rc = MPI_SUCCESS;
    poll_until(
        [&] {
            int done = 0;
            rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
            return rc != MPI_SUCCESS || done != 0;
        },
        what);
    return rc;
}

void MpiCommunicator::wait(MPI_Request& req, const char* what, std::int64_t bytes, int peer) {
    watchdog::Op op = watchdog::on_group(what, *watched_);
    op.peer = peer >= 0 && peer < size_ ? world_ranks_[static_cast<std::size_t>(peer)] : -1;
    op.bytes = bytes;
    watchdog::OpScope scope(op);
    check(wait_request(req, what), what, name_);
}

bool MpiCommunicator::test(MPI_Request& req, const char* what) {
    if (req == MPI_REQUEST_NULL) return true;
    int done = 0;
    check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what, name_);
    return done != 0;
}

void MpiCommunicator::all_reduce(void* buf, std::int64_t count, CommType t, ReduceOp op) {
    this->count(CommOp::AllReduce, count * comm_type_size(t));
    if (size_ == 1) return;
    MPI_Request req;
    check(MPI_Iallreduce(MPI_IN_PLACE, buf, checked_count(count), mpi_datatype(t), mpi_op(t, op),
                         comm_, &req),
          "all-reduce", name_);
    wait(req, "all-reduce", count * static_cast<std::int64_t>(comm_type_size(t)));
}

void MpiCommunicator::all_gather(const void* send, void* recv, std::int64_t count, CommType t) {
    const std::size_t bytes = count * comm_type_size(t);
    this->count(CommOp::AllGather, bytes * size_);
    if (size_ == 1) {
        if (send != recv) std::memcpy(recv, send, bytes);
        return;
    }
    const void* src = send;
    // In-place when the caller passes its own slot of recv.
    if (static_cast<const char*>(send) == static_cast<char*>(recv) + bytes * rank_) src = MPI_IN_PLACE;
    MPI_Request req;
    check(MPI_Iallgather(src, checked_count(count), mpi_datatype(t), recv, checked_count(count),
                         mpi_datatype(t), comm_, &req),
          "all-gather", name_);
    wait(req, "all-gather", static_cast<std::int64_t>(bytes));
}

void MpiCommunicator::reduce_scatter(const void* send, void* recv, std::int64_t count, CommType t,
                                     ReduceOp op) {
    const std::size_t bytes = count * comm_type_size(t);
    this->count(CommOp::ReduceScatter, bytes * size_);
    if (size_ == 1) {
        if (send != recv) std::memcpy(recv, send, bytes);
        return;
    }
    MPI_Request req;
    check(MPI_Ireduce_scatter_block(send, recv, checked_count(count), mpi_datatype(t),
                                    mpi_op(t, op), comm_, &req),
          "reduce-scatter", name_);
    wait(req, "reduce-scatter", static_cast<std::int64_t>(bytes) * size_);
}

void MpiCommunicator::broadcast(void* buf, std::int64_t count, CommType t, int root) {
    this->count(CommOp::Broadcast, count * comm_type_size(t));
    if (size_ == 1) return;
    MPI_Request req;
    check(MPI_Ibcast(buf, checked_count(count), mpi_datatype(t), root, comm_, &req), "broadcast", name_);
    wait(req, "broadcast", count * static_cast<std::int64_t>(comm_type_size(t)));
}

void MpiCommunicator::send(const void* buf, std::int64_t count, CommType t, int peer, int tag) {
    this->count(CommOp::Send, count * comm_type_size(t));
    MPI_Request req;
    check(MPI_Isend(buf, checked_count(count), mpi_datatype(t), peer, tag, comm_, &req), "send", name_);
    wait(req, "send", count * static_cast<std::int64_t>(comm_type_size(t)), peer);
}

void MpiCommunicator::recv(void* buf, std::int64_t count, CommType t, int peer, int tag) {
    this->count(CommOp::Recv, count * comm_type_size(t));
    MPI_Request req;
    check(MPI_Irecv(buf, checked_count(count), mpi_datatype(t), peer, tag, comm_, &req), "recv", name_);
    wait(req, "recv", count * static_cast<std::int64_t>(comm_type_size(t)), peer);
}

namespace {
// One or more requests, completed together.
class MpiPendingOp final : public PendingOp {
public:
    MpiPendingOp(MpiCommunicator& comm, std::vector<MPI_Request> reqs, const char* what,
                 std::int64_t bytes, int peer = -1)
        : comm_(comm), reqs_(std::move(reqs)), what_(what), bytes_(bytes), peer_(peer) {}
    MpiPendingOp(MpiCommunicator& comm, MPI_Request req, const char* what, std::int64_t bytes,
                 int peer = -1)
        : MpiPendingOp(comm, std::vector<MPI_Request>{req}, what, bytes, peer) {}
    ~MpiPendingOp() override {
        // An operation must not outlive its wait: completing it here keeps the buffer contract.
        try {
            wait();
        } catch (...) {
        }
    }
    void wait() override {
        for (MPI_Request& r : reqs_)
            if (r != MPI_REQUEST_NULL) comm_.wait(r, what_, bytes_, peer_);
    }
    bool test() override {
        bool done = true;
        for (MPI_Request& r : reqs_) done = comm_.test(r, what_) && done;
        return done;
    }

private:
    MpiCommunicator& comm_;
    std::vector<MPI_Request> reqs_;
    const char* what_;
    std::int64_t bytes_;  // for the watchdog's record
    int peer_;
};
}  // namespace

std::unique_ptr<PendingOp> MpiCommunicator::iall_reduce(void* buf, std::int64_t count, CommType t,
                                                        ReduceOp op) {
    this->count(CommOp::AllReduce, count * comm_type_size(t));
    MPI_Request req = MPI_REQUEST_NULL;
    if (size_ > 1)
        check(MPI_Iallreduce(MPI_IN_PLACE, buf, checked_count(count), mpi_datatype(t),
                             mpi_op(t, op), comm_, &req),
              "all-reduce", name_);
    return std::make_unique<MpiPendingOp>(*this, req, "all-reduce", count * static_cast<std::int64_t>(comm_type_size(t)));
}

std::unique_ptr<PendingOp> MpiCommunicator::ireduce_scatter_v(const void* send, void* recv,
                                                              std::vector<std::int64_t> counts,
                                                              CommType t, ReduceOp op) {
    count_pieces(CommOp::ReduceScatter, counts, t);
    const std::size_t es = comm_type_size(t);
    // One reduce per piece, rooted at its owner: unlike MPI_Reduce_scatter this can leave
    // the result in the owner's own piece of send (MPI_IN_PLACE at the root).
    std::vector<MPI_Request> reqs;
    std::int64_t off = 0;
    for (int r = 0; r < size_; ++r) {
        const std::int64_t n = counts[static_cast<std::size_t>(r)];
        const char* piece = static_cast<const char*>(send) + off * es;
        off += n;
        if (n == 0) continue;
        if (size_ == 1) {
            if (piece != recv) std::memcpy(recv, piece, static_cast<std::size_t>(n) * es);
            continue;
        }
        const void* src = piece;
        if (r == rank_ && piece == recv) src = MPI_IN_PLACE;
        MPI_Request req;
        check(MPI_Ireduce(src, r == rank_ ? recv : nullptr, checked_count(n), mpi_datatype(t),
                          mpi_op(t, op), r, comm_, &req),
              "reduce-scatter", name_);
        reqs.push_back(req);
    }
    return std::make_unique<MpiPendingOp>(*this, std::move(reqs), "reduce-scatter",
                                          off * static_cast<std::int64_t>(es));
}

std::unique_ptr<PendingOp> MpiCommunicator::isend(const void* buf, std::int64_t count, CommType t,
                                                    int peer, int tag) {
    this->count(CommOp::Send, count * comm_type_size(t));
    MPI_Request req;
    check(MPI_Isend(buf, checked_count(count), mpi_datatype(t), peer, tag, comm_, &req), "send", name_);
    return std::make_unique<MpiPendingOp>(*this, req, "send", count * static_cast<std::int64_t>(comm_type_size(t)), peer);
}

void MpiCommunicator::barrier() {
    this->count(CommOp::Barrier, 0);
    if (size_ == 1) return;
    MPI_Request req;
    check(MPI_Ibarrier(comm_, &req), "barrier", name_);
    wait(req, "barrier", 0);
}

}  // namespace gpt::dist
