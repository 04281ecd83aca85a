#include "data/commit_queue.hpp"

#include "core/errors.hpp"
#include "core/wait.hpp"

namespace gpt::data {

CommitQueue::CommitQueue(std::size_t threads) : limit_(threads < 1 ? 1 : threads) {
    for (std::size_t i = 0; i < limit_; ++i) threads_.emplace_back([this] { run(); });
}

CommitQueue::~CommitQueue() { finish(); }

void CommitQueue::add(std::unique_ptr<DurableFileWriter> file, std::string path, std::function<void()> on_done) {
    std::unique_lock<std::mutex> lock(mu_);
    GPT_ASSERT(!closed_, "commit added to a finished queue");
    wait_cv(cv_, lock, [&] { return jobs_.size() < limit_; }, "a free place in the index cache commit queue");
    jobs_.push_back(Job{std::move(file), std::move(path), std::move(on_done)});
    ++pending_;
    cv_.notify_all();
}

void CommitQueue::finish() {
    {
        std::unique_lock<std::mutex> lock(mu_);
        // The disk confirming the files: a wait the watchdog bounds, unlike the join below
        // (which then only waits for threads with nothing left to do).
        wait_cv(cv_, lock, [&] { return pending_ == 0; }, "the index caches' fsync");
        closed_ = true;
        cv_.notify_all();
    }
    for (std::thread& t : threads_)
        if (t.joinable()) t.join();
}

void CommitQueue::run() {
    for (;;) {
        Job job;
        {
            std::unique_lock<std::mutex> lock(mu_);
            // Idle, not waiting for anyone: a plain wait, which the watchdog does not bound
            // (the builder may compute for longer than its limit before the next file).
            cv_.wait(lock, [&] { return closed_ || !jobs_.empty(); });
            if (jobs_.empty()) return;  // closed, and nothing left
            job = std::move(jobs_.front());
            jobs_.pop_front();
            cv_.notify_all();  // a place is free
        }
        bool committed = true;
        try {
            job.file->commit(job.path);
        } catch (const Error&) {
            committed = false;  // the file is gone; the caller sees on_done not called
        }
        if (committed) job.on_done();
        std::lock_guard<std::mutex> lock(mu_);
        --pending_;
        cv_.notify_all();
    }
}

}  // namespace gpt::data
