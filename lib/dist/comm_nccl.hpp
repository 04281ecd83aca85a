// Communicator over NCCL for device buffers (built only with the CUDA backend).
//
// Created from an MPI communicator: rank 0 makes the NCCL unique ids and broadcasts them
// over it, so every process group of ProcessGroups can get its NCCL twin. Construct it
// after make_backend("cuda", local_rank) has chosen this rank's GPU: NCCL binds to the
// current device. Public header: no CUDA or NCCL types (they live in comm_nccl.cpp).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "core/stream.hpp"
#include "dist/communicator.hpp"

namespace gpt::dist {

// Semantics as MpiCommunicator, on device pointers: each operation starts after the CUDA
// backend's work issued so far (an event on its compute stream, given at construction), and every call but isend and the
// i-collectives leaves its result in place for all later backend work and device-to-host
// copies (the backend's stream waits for it on the device, as Megatron's collectives on the
// current stream do), so callers need no stream handling and the host never stalls on a
// collective. PendingOp::wait() completes on the host. Point-to-point: NCCL has no tags, so messages between two ranks match in the
// order they are posted (as pipeline schedules post them); `tag` is ignored.
class NcclCommunicator final : public Communicator {
public:
    // Duplicates `comm` (the caller keeps its own); collective over `comm`. `compute` is the
    // CUDA backend's stream (Backend::stream()), which this communicator orders against.
    NcclCommunicator(MPI_Comm comm, std::string name, Stream compute);
    ~NcclCommunicator() override;

    const std::string& name() const override { return name_; }
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    // The stream given at construction, which every operation is ordered against.
    Stream compute_stream() const;

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

    struct Impl;

private:
    void after_compute(void* stream);   // stream: cudaStream_t (no CUDA types in this header)
    void before_compute(void* stream);  // the compute stream waits for `stream`'s work so far

    std::string name_;
    int rank_ = 0;
    int size_ = 1;
    std::unique_ptr<Impl> impl_;
};

}  // namespace gpt::dist
