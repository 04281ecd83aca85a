#include "pipeline/executor.hpp"

#include <deque>
#include <memory>
#include <vector>

#include "core/errors.hpp"
#include "core/timer.hpp"
#include "core/watchdog.hpp"

namespace gpt::pipeline {

namespace {

// One boundary buffer of `space` (host memory when it has no allocator).
class Buffer {
public:
    Buffer(const BufferSpace& space, std::size_t bytes) : space_(&space) {
        if (bytes == 0) return;  // no buffer: p_ stays null
        if (space.alloc) {
            p_ = space.alloc(bytes);
        } else {
            host_.resize(bytes);
            p_ = host_.data();
        }
    }
    ~Buffer() {
        if (p_ && space_->alloc) space_->free(p_);
    }
    Buffer(Buffer&& o) noexcept : space_(o.space_), host_(std::move(o.host_)), p_(o.p_) { o.p_ = nullptr; }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    Buffer& operator=(Buffer&&) = delete;
    void* data() { return p_; }

private:
    const BufferSpace* space_;
    std::vector<char> host_;
    void* p_ = nullptr;
};

// Send buffers stay alive until their non-blocking send completed.
class SendPool {
public:
    SendPool(const BufferSpace& space, std::size_t bytes) : space_(space), bytes_(bytes) {}
    Buffer& take() {
        for (auto& s : slots_)
            if (!s.pending) return s.buffer;
        // Reclaim the oldest in-flight send before growing.
        if (slots_.size() >= kMaxSlots) {
            auto& oldest = slots_.front();
            oldest.pending->wait();
            oldest.pending.reset();
            slots_.push_back(std::move(oldest));
            slots_.pop_front();
            return slots_.back().buffer;
        }
        slots_.push_back({Buffer(space_, bytes_), nullptr});
        return slots_.back().buffer;
    }
    void sent(Buffer& buffer, std::unique_ptr<dist::PendingOp> p) {
        for (auto& s : slots_)
            if (&s.buffer == &buffer) s.pending = std::move(p);
    }
    void drain() {
        for (auto& s : slots_)
            if (s.pending) {
                s.pending->wait();
                s.pending.reset();
            }
    }

private:
    static constexpr std::size_t kMaxSlots = 64;
    struct Slot {
        Buffer buffer;
        std::unique_ptr<dist::PendingOp> pending;
    };
    const BufferSpace& space_;
    std::size_t bytes_;
    std::deque<Slot> slots_;
};

}  // namespace

PipelineTiming run_pipeline(const PipelineShape& sh, dist::Communicator& pp, const StageFunctions& fn,
                            const BufferSpace& space, Timers* timers) {
    const int p = sh.pp_size, s = sh.stage, m = sh.num_microbatches, v = sh.num_chunks;
    GPT_ASSERT(pp.size() == p && pp.rank() == s, "pipeline group does not match the shape");
    const std::vector<Action> schedule =
        sh.forward_only ? forward_only_schedule(m, v) : make_schedule(p, s, m, v);
    const std::size_t bytes = sh.activation_count * dist::comm_type_size(sh.type);
    const int next = (s + 1) % p, prev = (s - 1 + p) % p;
    // Messages between two stages in one direction are matched by tag; beyond MPI's
    // guaranteed tag range the (pass, chunk) tag still matches by FIFO order, because both
    // sides visit a chunk's micro-batches in increasing order.
    const bool full_tags = 2LL * v * m < 32767;
    auto tag = [&](Pass pass, int chunk, int mb) {
        const int base = (pass == Pass::Forward ? 0 : v) + chunk;
        return full_tags ? base * m + mb : base;
    };

    SendPool pool(space, bytes);
    // One stage holding the whole model (p = v = 1) sends and receives nothing: no receive
    // buffer. (One stage with several chunks passes activations to itself.)
    Buffer recv_buf(space, p * v > 1 ? bytes : 0);
    PipelineTiming timing;
    // The watchdog's report names the micro-batch a stuck rank was at (core/watchdog.hpp).
    struct MicroBatchMark {
        ~MicroBatchMark() { watchdog::set_micro_batch(-1); }
    } mark;
    for (const Action& a : schedule) {
        watchdog::set_micro_batch(a.microbatch);
        const int vstage = a.chunk * p + s;
        const bool first = vstage == 0, last = vstage == p * v - 1;
        if (a.pass == Pass::Forward) {
            const void* in = nullptr;
            if (!first) {
                Stopwatch w;
                Timers::Scope phase(timers, Phase::ForwardRecv);
                // Chunk c's input comes from stage s-1 (same chunk) or, on stage 0, from the
                // last stage's chunk c-1: both are `prev` with the sender's own chunk id.
                const int src_chunk = s == 0 ? a.chunk - 1 : a.chunk;
                pp.recv(recv_buf.data(), sh.activation_count, sh.type, prev, tag(Pass::Forward, src_chunk, a.microbatch));
                timing.wait_seconds += w.seconds();
                in = recv_buf.data();
            }
            Buffer* out = last ? nullptr : &pool.take();
            {
                Stopwatch c;
                Timers::Scope phase(timers, Phase::ForwardCompute);
                fn.forward(a.microbatch, a.chunk, in, out ? out->data() : nullptr);
                timing.compute_seconds += c.seconds();
            }
            if (out) {
                Timers::Scope phase(timers, Phase::ForwardSend);
                pool.sent(*out, pp.isend(out->data(), sh.activation_count, sh.type, next,
                                         tag(Pass::Forward, a.chunk, a.microbatch)));
            }
        } else {
            const void* grad_out = nullptr;
            if (!last) {
                Stopwatch w;
                Timers::Scope phase(timers, Phase::BackwardRecv);
                const int src_chunk = s == p - 1 ? a.chunk + 1 : a.chunk;
                pp.recv(recv_buf.data(), sh.activation_count, sh.type, next, tag(Pass::Backward, src_chunk, a.microbatch));
                timing.wait_seconds += w.seconds();
                grad_out = recv_buf.data();
            }
            Buffer* gin = first ? nullptr : &pool.take();
            {
                Stopwatch c;
                Timers::Scope phase(timers, Phase::BackwardCompute);
                fn.backward(a.microbatch, a.chunk, grad_out, gin ? gin->data() : nullptr);
                timing.compute_seconds += c.seconds();
            }
            if (gin) {
                Timers::Scope phase(timers, Phase::BackwardSend);
                pool.sent(*gin, pp.isend(gin->data(), sh.activation_count, sh.type, prev,
                                         tag(Pass::Backward, a.chunk, a.microbatch)));
            }
        }
    }
    watchdog::set_micro_batch(-1);
    Stopwatch w;
    pool.drain();
    timing.wait_seconds += w.seconds();
    return timing;
}

}  // namespace gpt::pipeline
