#include "ckpt/checksum_worker.hpp"

#include <system_error>

#include "ckpt/checksum.hpp"
#include "ckpt/dataset_io.hpp"
#include "core/wait.hpp"

namespace gpt::ckpt {

ChecksumWorker::ChecksumWorker(Phase phase) : phase_(phase) {
    try {
        thread_ = std::jthread([this](std::stop_token stop) { loop(stop); });
    } catch (const std::system_error&) {
        // No thread: add() sums inline.
    }
}

ChecksumWorker::~ChecksumWorker() {
    if (thread_.joinable()) {
        thread_.request_stop();
        cv_.notify_all();
        thread_.join();
    }
}

void ChecksumWorker::run(const Job& j) const {
    PhaseTimer t(phase_);
    *j.sum = checksum_add(*j.sum, checksum_selection(*j.global, j.piece, j.esize, j.data));
}

void ChecksumWorker::add(std::uint64_t* sum, const Shape& global, const Selection& piece, std::size_t esize,
                         const void* data) {
    Job job{sum, &global, piece, esize, data};
    if (!thread_.joinable()) {
        run(job);
        return;
    }
    {
        std::lock_guard lock(mutex_);
        jobs_.push_back(std::move(job));
    }
    cv_.notify_all();
}

void ChecksumWorker::loop(std::stop_token stop) {
    std::unique_lock lock(mutex_);
    while (true) {
        if (!cv_.wait(lock, stop, [&] { return !jobs_.empty(); })) return;  // stop requested
        Job job = std::move(jobs_.front());
        jobs_.pop_front();
        busy_ = true;
        lock.unlock();
        try {
            if (!error_) run(job);
        } catch (...) {
            error_ = std::current_exception();  // read by finish() under the lock
        }
        lock.lock();
        busy_ = false;
        cv_.notify_all();
    }
}

void ChecksumWorker::wait_pending(std::size_t max_outstanding) {
    if (!thread_.joinable()) return;
    std::unique_lock lock(mutex_);
    wait_cv(cv_, lock, [&] { return jobs_.size() + (busy_ ? 1 : 0) <= max_outstanding; },
            "the checkpoint checksum worker");
}

void ChecksumWorker::finish() {
    if (thread_.joinable()) {
        std::unique_lock lock(mutex_);
        wait_cv(cv_, lock, [&] { return jobs_.empty() && !busy_; }, "the checkpoint checksum worker");
    }
    if (error_) std::rethrow_exception(error_);
}

}  // namespace gpt::ckpt
