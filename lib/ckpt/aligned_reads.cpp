#include "ckpt/aligned_reads.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "ckpt/aligned_writes.hpp"
#include "core/errors.hpp"
#include "core/wait.hpp"

namespace gpt::ckpt {

namespace {
std::atomic<bool> g_refuse_direct{false};

// Reads up to `bytes` at offset (fewer only at the end of the file); 0 or the errno.
// direct: a count that is not a whole number of pages is the end of the file (the next
// pread would be at an unaligned offset, which O_DIRECT may refuse).
int pread_all(int fd, unsigned char* p, std::size_t bytes, std::uint64_t offset, std::size_t* got, bool direct) {
    std::size_t done = 0;
    while (done < bytes) {
        if (direct && g_refuse_direct.load(std::memory_order_relaxed)) return EINVAL;
        const ssize_t k = ::pread(fd, p + done, bytes - done, static_cast<off_t>(offset + done));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return errno;
        if (k == 0) break;
        done += static_cast<std::size_t>(k);
        if (direct && done % AlignedReads::kAlign != 0) break;
    }
    *got = done;
    return 0;
}
}  // namespace

void AlignedReads::refuse_direct_reads_for_testing(bool refuse) { g_refuse_direct = refuse; }

AlignedReads::AlignedReads(int fd_direct, int fd_buffered, std::string file, std::vector<Request> requests)
    : fd_direct_(fd_direct), fd_buffered_(fd_buffered), file_(std::move(file)), requests_(std::move(requests)),
      slots_(requests_.size()), direct_ok_(fd_direct >= 0) {
    if (requests_.empty()) return;
    for (const Request& r : requests_)
        GPT_REQUIRE(r.offset % kAlign == 0 && r.bytes % kAlign == 0 && r.bytes <= AlignedWrites::kPieceBytes,
                    InternalError, "unaligned direct read of ", r.bytes, " bytes at offset ", r.offset, " of ", file_);
    for (int i = 0; i < AlignedWrites::kBuffers; ++i) {
        owned_.push_back(take_bounce_buffer());
        free_.push_back(owned_.back());
    }
    try {
        for (int i = 0; i < AlignedWrites::kThreads; ++i) threads_.emplace_back([this](std::stop_token stop) { loop(stop); });
    } catch (const std::system_error&) {
        GPT_REQUIRE(!threads_.empty(), IoError, "cannot start a reader thread for checkpoint file ", file_);
    }
}

AlignedReads::~AlignedReads() {
    for (auto& t : threads_) t.request_stop();
    cv_.notify_all();
    threads_.clear();  // joins; a read in progress finishes first
    for (unsigned char* p : owned_) return_bounce_buffer(p);
}

void AlignedReads::loop(std::stop_token stop) {
    std::unique_lock lock(mutex_);
    while (true) {
        if (!cv_.wait(lock, stop, [&] { return next_ < requests_.size() && !free_.empty(); })) return;
        const std::size_t i = next_++;
        unsigned char* buf = free_.back();
        free_.pop_back();
        bool direct = direct_ok_;
        lock.unlock();
        const Request& r = requests_[i];
        std::size_t got = 0;
        int err = direct ? pread_all(fd_direct_, buf, r.bytes, r.offset, &got, true) : EINVAL;
        if (direct && err == EINVAL) {
            lock.lock();
            direct_ok_ = false;  // the file system wants another alignment: buffered from now on
            lock.unlock();
            direct = false;
        }
        if (!direct) err = pread_all(fd_buffered_, buf, r.bytes, r.offset, &got, false);
        lock.lock();
        if (direct && err == 0) direct_bytes_ += got;
        slots_[i] = {buf, got, err, true};
        cv_.notify_all();
    }
}

const unsigned char* AlignedReads::get(std::size_t i, std::size_t* got) {
    std::unique_lock lock(mutex_);
    wait_cv(cv_, lock, [&] { return slots_[i].done; }, "the checkpoint's direct-I/O readers");
    const Slot& s = slots_[i];
    if (s.error != 0)
        GPT_THROW(IoError, "reading checkpoint file ", file_, " failed: ", std::strerror(s.error), " (",
                  requests_[i].bytes, " bytes at offset ", requests_[i].offset, ")");
    *got = s.got;
    return s.buffer;
}

void AlignedReads::release(std::size_t i) {
    {
        std::lock_guard lock(mutex_);
        free_.push_back(slots_[i].buffer);
        slots_[i].buffer = nullptr;
    }
    cv_.notify_all();
}

}  // namespace gpt::ckpt
