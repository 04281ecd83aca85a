// Commits written files (DurableFileWriter: fsync, then rename into place) on background
// threads. A builder of many files (a blend's hundreds of index caches) would otherwise wait
// for the disk once per file; with the queue it builds the next file meanwhile, and the
// waiting fsyncs overlap each other (the file system commits them together). The durability
// is the synchronous commit's: nothing is renamed into place before its fsync returned.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/mapped_file.hpp"

namespace gpt::data {

class CommitQueue {
public:
    // `threads` commits run at once; as many more may wait (add blocks beyond that), which
    // bounds the temporary files left for the next run to remove if this one is killed.
    explicit CommitQueue(std::size_t threads);
    ~CommitQueue();  // finish()
    CommitQueue(const CommitQueue&) = delete;
    CommitQueue& operator=(const CommitQueue&) = delete;

    // Commits `file` to `path` later; on success calls on_done (on a queue thread). A commit
    // that fails removes its temporary file (DurableFileWriter) and is dropped: the caller
    // learns it by on_done not being called.
    void add(std::unique_ptr<DurableFileWriter> file, std::string path, std::function<void()> on_done);
    // Waits until every commit added has ended, and stops the threads.
    void finish();

private:
    struct Job {
        std::unique_ptr<DurableFileWriter> file;
        std::string path;
        std::function<void()> on_done;
    };
    void run();
    std::size_t limit_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Job> jobs_;
    std::size_t pending_ = 0;  // added and not yet ended (queued or committing)
    bool closed_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace gpt::data
