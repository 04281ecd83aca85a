#include "dist/comm_staged.hpp"

#include <numeric>

namespace gpt::dist {

namespace {

std::size_t bytes_of(std::int64_t count, CommType t) {
    return static_cast<std::size_t>(count) * comm_type_size(t);
}

// A host-side operation on a host copy; when it completes, `finish` copies the result to
// the device (once). The staging buffer lives as long as the operation.
class StagedPendingOp final : public PendingOp {
public:
    StagedPendingOp(std::vector<char> staging, std::unique_ptr<PendingOp> inner,
                    std::function<void(const char* staging)> finish)
        : staging_(std::move(staging)), inner_(std::move(inner)), finish_(std::move(finish)) {}
    ~StagedPendingOp() override {
        // The contract completes an operation on destruction; errors surface from wait()
        // on the normal path, a destructor can only drop them.
        try {
            wait();
        } catch (...) {
        }
    }
    void wait() override {
        if (done_) return;
        inner_->wait();
        complete();
    }
    bool test() override {
        if (done_) return true;
        if (!inner_->test()) return false;
        complete();
        return true;
    }

private:
    void complete() {
        done_ = true;
        if (finish_) finish_(staging_.data());
    }
    std::vector<char> staging_;
    std::unique_ptr<PendingOp> inner_;
    std::function<void(const char*)> finish_;
    bool done_ = false;
};

}  // namespace

StagedCommunicator::StagedCommunicator(Communicator& host, DeviceCopy copy)
    : host_(host), copy_(std::move(copy)) {}

char* StagedCommunicator::stage(std::vector<char>& v, std::size_t bytes) {
    if (v.size() < bytes) v.resize(bytes);
    return v.data();
}

void StagedCommunicator::all_reduce(void* buf, std::int64_t count, CommType t, ReduceOp op) {
    this->count(CommOp::AllReduce, bytes_of(count, t));
    char* h = stage(a_, bytes_of(count, t));
    copy_.to_host(h, buf, bytes_of(count, t));
    host_.all_reduce(h, count, t, op);
    copy_.to_device(buf, h, bytes_of(count, t));
}

void StagedCommunicator::all_gather(const void* send, void* recv, std::int64_t count, CommType t) {
    this->count(CommOp::AllGather, bytes_of(count, t) * static_cast<std::size_t>(size()));
    char* hs = stage(a_, bytes_of(count, t));
    char* hr = stage(b_, bytes_of(count, t) * static_cast<std::size_t>(size()));
    copy_.to_host(hs, send, bytes_of(count, t));
    host_.all_gather(hs, hr, count, t);
    copy_.to_device(recv, hr, bytes_of(count, t) * static_cast<std::size_t>(size()));
}

void StagedCommunicator::reduce_scatter(const void* send, void* recv, std::int64_t count, CommType t,
                                        ReduceOp op) {
    this->count(CommOp::ReduceScatter, bytes_of(count, t) * static_cast<std::size_t>(size()));
    char* hs = stage(a_, bytes_of(count, t) * static_cast<std::size_t>(size()));
    char* hr = stage(b_, bytes_of(count, t));
    copy_.to_host(hs, send, bytes_of(count, t) * static_cast<std::size_t>(size()));
    host_.reduce_scatter(hs, hr, count, t, op);
    copy_.to_device(recv, hr, bytes_of(count, t));
}

void StagedCommunicator::broadcast(void* buf, std::int64_t count, CommType t, int root) {
    this->count(CommOp::Broadcast, bytes_of(count, t));
    char* h = stage(a_, bytes_of(count, t));
    if (rank() == root) copy_.to_host(h, buf, bytes_of(count, t));
    host_.broadcast(h, count, t, root);
    if (rank() != root) copy_.to_device(buf, h, bytes_of(count, t));
}

void StagedCommunicator::send(const void* buf, std::int64_t count, CommType t, int peer, int tag) {
    this->count(CommOp::Send, bytes_of(count, t));
    char* h = stage(a_, bytes_of(count, t));
    copy_.to_host(h, buf, bytes_of(count, t));
    host_.send(h, count, t, peer, tag);
}

void StagedCommunicator::recv(void* buf, std::int64_t count, CommType t, int peer, int tag) {
    this->count(CommOp::Recv, bytes_of(count, t));
    char* h = stage(a_, bytes_of(count, t));
    host_.recv(h, count, t, peer, tag);
    copy_.to_device(buf, h, bytes_of(count, t));
}

std::unique_ptr<PendingOp> StagedCommunicator::isend(const void* buf, std::int64_t count, CommType t,
                                                     int peer, int tag) {
    this->count(CommOp::Send, bytes_of(count, t));
    std::vector<char> h(bytes_of(count, t));
    copy_.to_host(h.data(), buf, h.size());
    auto inner = host_.isend(h.data(), count, t, peer, tag);
    return std::make_unique<StagedPendingOp>(std::move(h), std::move(inner), nullptr);
}

void StagedCommunicator::barrier() {
    this->count(CommOp::Barrier, 0);
    host_.barrier();
}

std::unique_ptr<PendingOp> StagedCommunicator::iall_reduce(void* buf, std::int64_t count, CommType t,
                                                           ReduceOp op) {
    this->count(CommOp::AllReduce, bytes_of(count, t));
    const std::size_t n = bytes_of(count, t);
    std::vector<char> h(n);
    copy_.to_host(h.data(), buf, n);
    auto inner = host_.iall_reduce(h.data(), count, t, op);
    auto finish = [this, buf, n](const char* staged) { copy_.to_device(buf, staged, n); };
    return std::make_unique<StagedPendingOp>(std::move(h), std::move(inner), finish);
}

std::unique_ptr<PendingOp> StagedCommunicator::ireduce_scatter_v(const void* send, void* recv,
                                                                 std::vector<std::int64_t> counts,
                                                                 CommType t, ReduceOp op) {
    const std::int64_t total = count_pieces(CommOp::ReduceScatter, counts, t);
    const auto me = static_cast<std::size_t>(rank());
    const std::int64_t mine_at = std::accumulate(counts.begin(), counts.begin() + static_cast<std::ptrdiff_t>(me),
                                                 std::int64_t{0});
    const std::size_t offset = bytes_of(mine_at, t), n = bytes_of(counts[me], t);
    std::vector<char> h(bytes_of(total, t));
    copy_.to_host(h.data(), send, h.size());
    // In place on the host copy: this rank's piece of it receives the reduction.
    auto inner = host_.ireduce_scatter_v(h.data(), h.data() + offset, std::move(counts), t, op);
    auto finish = [this, recv, offset, n](const char* staged) {
        if (n > 0) copy_.to_device(recv, staged + offset, n);
    };
    return std::make_unique<StagedPendingOp>(std::move(h), std::move(inner), finish);
}

}  // namespace gpt::dist
