// Communicator for device buffers over a communicator for host buffers: each operation
// copies its device input to host memory, runs there, and copies the result back.
// This is --distributed-backend mpi on GPUs (several ranks sharing one GPU, where NCCL
// refuses), and how CI runs every device path without a GPU (tests/common/emulated_device).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.hpp"

namespace gpt::dist {

// Copies between host memory and the memory the device buffers live in (a backend's
// copy_to_host / copy_to_device); both return when the bytes have arrived.
struct DeviceCopy {
    std::function<void(void* host_dst, const void* device_src, std::size_t bytes)> to_host;
    std::function<void(void* device_dst, const void* host_src, std::size_t bytes)> to_device;
};

class StagedCommunicator final : public Communicator {
public:
    // `host` must outlive this; it sees (and counts) every staged operation as well.
    StagedCommunicator(Communicator& host, DeviceCopy copy);

    const std::string& name() const override { return host_.name(); }
    int rank() const override { return host_.rank(); }
    int size() const override { return host_.size(); }

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

private:
    // Reused host staging for blocking calls; non-blocking ones own theirs until done.
    char* stage(std::vector<char>& v, std::size_t bytes);

    Communicator& host_;
    DeviceCopy copy_;
    std::vector<char> a_, b_;
};

}  // namespace gpt::dist
