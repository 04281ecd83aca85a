// Checksums pieces of tensors on a helper thread while the calling thread does I/O.
//
// Loading reads a rank's tensors in 4 MiB pieces and verifies each piece's checksum; done
// inline, the checksum (0.18 s/GB) adds to the read time. Here the reader queues each piece
// after reading it and goes on to the next read while the worker sums it. The worker only
// reads the queued bytes (which must stay unchanged until finish()) and touches no MPI or
// HDF5. Where no thread can be started, pieces are summed inline.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "ckpt/profile.hpp"
#include "ckpt/selection.hpp"

namespace gpt::ckpt {

class ChecksumWorker {
public:
    // phase: where the worker's seconds are counted (Phase::SaveChecksum or LoadVerify).
    explicit ChecksumWorker(Phase phase);
    ~ChecksumWorker();  // stops and joins; pending pieces are dropped
    ChecksumWorker(const ChecksumWorker&) = delete;
    ChecksumWorker& operator=(const ChecksumWorker&) = delete;

    // *sum += checksum of `piece` of a tensor of shape `global` whose selected elements sit
    // at `data`. `sum` and `global` must stay valid, and only this worker may touch *sum,
    // until finish().
    void add(std::uint64_t* sum, const Shape& global, const Selection& piece, std::size_t esize,
             const void* data);
    // Waits until every queued piece is summed; rethrows the worker's error, if any.
    void finish();
    // Waits until at most `max_outstanding` pieces are queued or being summed (pieces are
    // summed in the order they were added), so the caller may reuse an older piece's buffer.
    void wait_pending(std::size_t max_outstanding);

private:
    struct Job {
        std::uint64_t* sum;
        const Shape* global;
        Selection piece;
        std::size_t esize;
        const void* data;
    };
    void run(const Job& j) const;
    void loop(std::stop_token stop);

    Phase phase_;
    std::mutex mutex_;
    std::condition_variable_any cv_;
    std::deque<Job> jobs_;
    bool busy_ = false;
    std::exception_ptr error_;
    std::jthread thread_;  // last: started after, stopped before the members it uses
};

}  // namespace gpt::ckpt
