// NcclCommunicator: NCCL collectives and point-to-point on device buffers.
//
// Three NCCL communicators per group: one for collectives and one per direction of
// point-to-point traffic ("up" carries messages from a lower to a higher rank, "down" the
// reverse), each on its own stream. A rank's pending isend to a peer then never queues in
// front of its receive from that peer, which would deadlock two ranks that exchange
// activations and gradients in both directions (1F1B does).
#include "dist/comm_nccl.hpp"
#include "dist/comm_mpi.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <vector>

#include "core/device_wait.hpp"
#include "core/errors.hpp"
#include "core/watchdog.hpp"

namespace gpt::dist {

namespace {

void check_nccl(ncclResult_t rc, const char* what, const std::string& group, ncclComm_t comm,
                const char* file, int line) {
    if (rc == ncclSuccess || rc == ncclInProgress) return;
    const char* last = comm ? ncclGetLastError(comm) : nullptr;
    GPT_THROW(CommError, file, ":", line, ": NCCL ", what, " on group '", group, "' failed: ",
              ncclGetErrorString(rc), (last && *last) ? " (" : "", (last && *last) ? last : "",
              (last && *last) ? ")" : "");
}
#define GPT_NCCL_CHECK(expr, what, comm) check_nccl((expr), what, name_, comm, __FILE__, __LINE__)

void check_cuda(cudaError_t rc, const char* what, const std::string& group, const char* file,
                int line) {
    if (rc == cudaSuccess) return;
    GPT_THROW(CommError, file, ":", line, ": CUDA ", what, " on NCCL group '", group,
              "' failed: ", cudaGetErrorString(rc));
}
#define GPT_NCCL_CUDA_CHECK(expr, what) check_cuda((expr), what, name_, __FILE__, __LINE__)

ncclDataType_t nccl_type(CommType t) {
    switch (t) {
        case CommType::F32: return ncclFloat32;
        case CommType::F16: return ncclFloat16;
        case CommType::BF16: return ncclBfloat16;
        case CommType::F64: return ncclFloat64;
        case CommType::I32: return ncclInt32;
        case CommType::I64: return ncclInt64;
        case CommType::U8: return ncclUint8;
    }
    GPT_THROW(InternalError, "unknown CommType");
}

ncclRedOp_t nccl_op(ReduceOp op) {
    switch (op) {
        case ReduceOp::Sum: return ncclSum;
        case ReduceOp::Max: return ncclMax;
        case ReduceOp::Min: return ncclMin;
    }
    GPT_THROW(InternalError, "unknown ReduceOp");
}

}  // namespace

struct NcclCommunicator::Impl {
    MPI_Comm mpi = MPI_COMM_NULL;
    ncclComm_t coll = nullptr, up = nullptr, down = nullptr;
    cudaStream_t compute = nullptr;  // the backend's (not owned)
    cudaStream_t coll_stream = nullptr, up_stream = nullptr, down_stream = nullptr;
    cudaEvent_t ready = nullptr;  // recorded on the compute stream before each operation
    cudaEvent_t done = nullptr;   // recorded on an NCCL stream after a blocking operation
    const watchdog::Group* watched = nullptr;  // this group in the watchdog's records
};

NcclCommunicator::NcclCommunicator(MPI_Comm comm, std::string name, Stream compute)
    : name_(std::move(name)), impl_(std::make_unique<Impl>()) {
    Impl& im = *impl_;
    GPT_REQUIRE(!compute.on_host(), InternalError, "NCCL group '", name_,
                "': needs the CUDA backend's compute stream");
    im.compute = static_cast<cudaStream_t>(compute.native());
    MPI_Comm_dup(comm, &im.mpi);
    MPI_Comm_rank(im.mpi, &rank_);
    MPI_Comm_size(im.mpi, &size_);
    im.watched = &watchdog::intern_group(name_, world_ranks_of(im.mpi));
    ncclUniqueId ids[3];
    if (rank_ == 0)
        for (auto& id : ids) GPT_NCCL_CHECK(ncclGetUniqueId(&id), "get unique id", nullptr);
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Ibcast(ids, static_cast<int>(sizeof(ids)), MPI_BYTE, 0, im.mpi, &req);
    if (rc == MPI_SUCCESS) rc = wait_request(req, "the NCCL unique id broadcast");
    GPT_REQUIRE(rc == MPI_SUCCESS, CommError, "NCCL group '", name_,
                "': broadcasting the unique id over MPI failed");
    GPT_NCCL_CHECK(ncclCommInitRank(&im.coll, size_, ids[0], rank_), "init", nullptr);
    GPT_NCCL_CHECK(ncclCommInitRank(&im.up, size_, ids[1], rank_), "init", nullptr);
    GPT_NCCL_CHECK(ncclCommInitRank(&im.down, size_, ids[2], rank_), "init", nullptr);
    // Non-blocking streams, ordered after the backend's work by an event per operation
    // (after_compute): a pending isend then never holds up later compute, as blocking
    // streams would through the legacy default stream's implicit synchronisation.
    for (cudaStream_t* s : {&im.coll_stream, &im.up_stream, &im.down_stream})
        GPT_NCCL_CUDA_CHECK(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking), "stream create");
    GPT_NCCL_CUDA_CHECK(cudaEventCreateWithFlags(&im.ready, cudaEventDisableTiming), "event create");
    GPT_NCCL_CUDA_CHECK(cudaEventCreateWithFlags(&im.done, cudaEventDisableTiming), "event create");
}

Stream NcclCommunicator::compute_stream() const { return Stream(impl_->compute); }

void NcclCommunicator::after_compute(void* stream) {
    // The buffers of this operation are final once the work issued so far to the backend's
    // compute stream is done.
    GPT_NCCL_CUDA_CHECK(cudaEventRecord(impl_->ready, impl_->compute), "event record");
    GPT_NCCL_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), impl_->ready, 0),
                        "stream wait");
}

void NcclCommunicator::before_compute(void* stream) {
    // Work issued to the compute stream from now on, and host copies (cudaMemcpy on the
    // legacy stream waits for the blocking compute stream), wait on the device for this
    // operation: the host goes on issuing kernels instead of draining the GPU's queue at
    // every tensor-parallel collective.
    GPT_NCCL_CUDA_CHECK(cudaEventRecord(impl_->done, static_cast<cudaStream_t>(stream)), "event record");
    GPT_NCCL_CUDA_CHECK(cudaStreamWaitEvent(impl_->compute, impl_->done, 0), "stream wait");
}

NcclCommunicator::~NcclCommunicator() {
    Impl& im = *impl_;
    for (cudaStream_t s : {im.coll_stream, im.up_stream, im.down_stream})
        if (s) {
            cudaStreamSynchronize(s);
            cudaStreamDestroy(s);
        }
    for (ncclComm_t c : {im.coll, im.up, im.down})
        if (c) ncclCommDestroy(c);
    if (im.ready) cudaEventDestroy(im.ready);
    if (im.done) cudaEventDestroy(im.done);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && im.mpi != MPI_COMM_NULL) MPI_Comm_free(&im.mpi);
}

void NcclCommunicator::all_reduce(void* buf, std::int64_t count, CommType t, ReduceOp op) {
    this->count(CommOp::AllReduce, count * comm_type_size(t));
    if (size_ == 1 || count == 0) return;
    after_compute(impl_->coll_stream);
    GPT_NCCL_CHECK(ncclAllReduce(buf, buf, static_cast<std::size_t>(count), nccl_type(t), nccl_op(op),
                                 impl_->coll, impl_->coll_stream), "all-reduce", impl_->coll);
    before_compute(impl_->coll_stream);
}

void NcclCommunicator::all_gather(const void* send, void* recv, std::int64_t count, CommType t) {
    const std::size_t bytes = count * comm_type_size(t);
    this->count(CommOp::AllGather, bytes * size_);
    if (count == 0) return;
    after_compute(impl_->coll_stream);
    if (size_ == 1) {
        if (send != recv)
            GPT_NCCL_CUDA_CHECK(cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDeviceToDevice,
                                                impl_->coll_stream), "all-gather copy");
    } else {
        // In place when send is this rank's slot of recv: NCCL handles that directly.
        GPT_NCCL_CHECK(ncclAllGather(send, recv, static_cast<std::size_t>(count), nccl_type(t),
                                     impl_->coll, impl_->coll_stream), "all-gather", impl_->coll);
    }
    before_compute(impl_->coll_stream);
}

void NcclCommunicator::reduce_scatter(const void* send, void* recv, std::int64_t count,
                                      CommType t, ReduceOp op) {
    const std::size_t bytes = count * comm_type_size(t);
    this->count(CommOp::ReduceScatter, bytes * size_);
    if (count == 0) return;
    after_compute(impl_->coll_stream);
    if (size_ == 1) {
        if (send != recv)
            GPT_NCCL_CUDA_CHECK(cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDeviceToDevice,
                                                impl_->coll_stream), "reduce-scatter copy");
    } else {
        GPT_NCCL_CHECK(ncclReduceScatter(send, recv, static_cast<std::size_t>(count), nccl_type(t),
                                         nccl_op(op), impl_->coll, impl_->coll_stream),
                       "reduce-scatter", impl_->coll);
    }
    before_compute(impl_->coll_stream);
}

void NcclCommunicator::broadcast(void* buf, std::int64_t count, CommType t, int root) {
    this->count(CommOp::Broadcast, count * comm_type_size(t));
    if (size_ == 1 || count == 0) return;
    after_compute(impl_->coll_stream);
    GPT_NCCL_CHECK(ncclBroadcast(buf, buf, static_cast<std::size_t>(count), nccl_type(t), root,
                                 impl_->coll, impl_->coll_stream), "broadcast", impl_->coll);
    before_compute(impl_->coll_stream);
}

namespace {
// What the watchdog reports when a wait on this group hangs (core/watchdog.hpp); `peer` is a
// group rank, -1 for a collective.
watchdog::Op wait_record(const char* what, const watchdog::Group& group, std::int64_t bytes, int peer) {
    watchdog::Op op = watchdog::on_group(what, group);
    op.bytes = bytes;
    op.peer = peer >= 0 ? group.ranks[static_cast<std::size_t>(peer)] : -1;
    return op;
}

class NcclPendingOp final : public PendingOp {
public:
    NcclPendingOp(cudaEvent_t ev, watchdog::Op op) : ev_(ev), op_(op) {}
    ~NcclPendingOp() override {
        // A send must not outlive its wait: completing it here keeps the buffer contract.
        if (ev_) {
            cudaEventSynchronize(ev_);
            cudaEventDestroy(ev_);
        }
    }
    void wait() override {
        if (!ev_) return;
        // Polled, so the hang watchdog bounds a send to a peer that never receives.
        struct Destroy {
            cudaEvent_t ev;
            ~Destroy() { cudaEventDestroy(ev); }
        } destroy{ev_};
        ev_ = nullptr;
        watchdog::OpScope scope(op_);
        wait_for_cuda_event(destroy.ev, op_.name);
    }
    bool test() override {
        if (!ev_) return true;
        const cudaError_t rc = cudaEventQuery(ev_);
        if (rc == cudaErrorNotReady) return false;
        wait();
        return true;
    }

private:
    cudaEvent_t ev_;
    watchdog::Op op_;  // what the watchdog reports if the wait hangs
};
}  // namespace

std::unique_ptr<PendingOp> NcclCommunicator::isend(const void* buf, std::int64_t count,
                                                     CommType t, int peer, int /*tag*/) {
    this->count(CommOp::Send, count * comm_type_size(t));
    GPT_REQUIRE(peer >= 0 && peer < size_ && peer != rank_, CommError, "NCCL group '", name_,
                "': send to rank ", peer, " from rank ", rank_, " of ", size_);
    ncclComm_t comm = peer > rank_ ? impl_->up : impl_->down;
    cudaStream_t stream = peer > rank_ ? impl_->up_stream : impl_->down_stream;
    after_compute(stream);
    GPT_NCCL_CHECK(ncclSend(buf, static_cast<std::size_t>(count), nccl_type(t), peer, comm, stream),
                   "send", comm);
    cudaEvent_t ev = nullptr;
    GPT_NCCL_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "send event");
    GPT_NCCL_CUDA_CHECK(cudaEventRecord(ev, stream), "send event");
    return std::make_unique<NcclPendingOp>(
        ev, wait_record("NCCL send", *impl_->watched, count * static_cast<std::int64_t>(comm_type_size(t)), peer));
}

namespace {
cudaEvent_t record_event(cudaStream_t stream, const std::string& name_) {
    cudaEvent_t ev = nullptr;
    GPT_NCCL_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "event");
    GPT_NCCL_CUDA_CHECK(cudaEventRecord(ev, stream), "event");
    return ev;
}
}  // namespace

std::unique_ptr<PendingOp> NcclCommunicator::iall_reduce(void* buf, std::int64_t count, CommType t,
                                                         ReduceOp op) {
    this->count(CommOp::AllReduce, count * comm_type_size(t));
    after_compute(impl_->coll_stream);
    if (size_ > 1 && count > 0)
        GPT_NCCL_CHECK(ncclAllReduce(buf, buf, static_cast<std::size_t>(count), nccl_type(t),
                                     nccl_op(op), impl_->coll, impl_->coll_stream),
                       "all-reduce", impl_->coll);
    return std::make_unique<NcclPendingOp>(
        record_event(impl_->coll_stream, name_),
        wait_record("NCCL all-reduce", *impl_->watched, count * static_cast<std::int64_t>(comm_type_size(t)), -1));
}

std::unique_ptr<PendingOp> NcclCommunicator::ireduce_scatter_v(const void* send, void* recv,
                                                               std::vector<std::int64_t> counts,
                                                               CommType t, ReduceOp op) {
    count_pieces(CommOp::ReduceScatter, counts, t);
    const std::size_t es = comm_type_size(t);
    after_compute(impl_->coll_stream);
    // NCCL has no v-variant: one reduce per piece, rooted at its owner, in one group.
    GPT_NCCL_CHECK(ncclGroupStart(), "group start", impl_->coll);
    std::int64_t off = 0;
    for (int r = 0; r < size_; ++r) {
        const auto n = static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]);
        if (n > 0)
            GPT_NCCL_CHECK(ncclReduce(static_cast<const char*>(send) + off * es, recv, n,
                                      nccl_type(t), nccl_op(op), r, impl_->coll, impl_->coll_stream),
                           "reduce", impl_->coll);
        off += counts[static_cast<std::size_t>(r)];
    }
    GPT_NCCL_CHECK(ncclGroupEnd(), "group end", impl_->coll);
    return std::make_unique<NcclPendingOp>(
        record_event(impl_->coll_stream, name_),
        wait_record("NCCL reduce-scatter", *impl_->watched, -1, -1));
}

void NcclCommunicator::send(const void* buf, std::int64_t count, CommType t, int peer, int tag) {
    isend(buf, count, t, peer, tag)->wait();
}

void NcclCommunicator::recv(void* buf, std::int64_t count, CommType t, int peer, int /*tag*/) {
    this->count(CommOp::Recv, count * comm_type_size(t));
    GPT_REQUIRE(peer >= 0 && peer < size_ && peer != rank_, CommError, "NCCL group '", name_,
                "': recv from rank ", peer, " on rank ", rank_, " of ", size_);
    // A message from a lower rank travels "up".
    ncclComm_t comm = peer < rank_ ? impl_->up : impl_->down;
    cudaStream_t stream = peer < rank_ ? impl_->up_stream : impl_->down_stream;
    // Also orders the receive after earlier reads of `buf` by the backend.
    after_compute(stream);
    GPT_NCCL_CHECK(ncclRecv(buf, static_cast<std::size_t>(count), nccl_type(t), peer, comm, stream),
                   "recv", comm);
    before_compute(stream);
}

void NcclCommunicator::barrier() {
    this->count(CommOp::Barrier, 0);
    // Device work this rank issued is finished, then the ranks meet on the host. Polled
    // stream by stream, so the hang watchdog bounds it (core/device_wait.hpp).
    for (cudaStream_t st : {impl_->compute, impl_->coll_stream, impl_->up_stream, impl_->down_stream})
        wait_for_cuda_stream(st, "device work before an NCCL barrier");
    GPT_NCCL_CUDA_CHECK(cudaDeviceSynchronize(), "barrier");
    if (size_ == 1) return;
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Ibarrier(impl_->mpi, &req);
    if (rc == MPI_SUCCESS) rc = wait_request(req, "the NCCL group's host barrier");
    GPT_REQUIRE(rc == MPI_SUCCESS, CommError, "NCCL group '", name_, "': MPI barrier failed");
}

}  // namespace gpt::dist
