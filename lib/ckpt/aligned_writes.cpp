#include "ckpt/aligned_writes.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <system_error>

#include "core/errors.hpp"
#include "core/wait.hpp"

namespace gpt::ckpt {

namespace {

// At most kPoolMax are kept: one save's or load's kBuffers is what a process normally uses.
constexpr std::size_t kPoolMax = 2 * AlignedWrites::kBuffers;
std::mutex pool_mutex;
std::vector<unsigned char*>& pool() {
    // Never destroyed: a writer or reader that outlives static destruction (or a save in
    // flight at exit) may still return its buffers, and LeakSanitizer counts what only a
    // destroyed vector pointed to as leaked (fuzz_ckpt found it once every load went direct).
    static auto* buffers = new std::vector<unsigned char*>;
    return *buffers;
}

}  // namespace

unsigned char* take_bounce_buffer() {
    {
        std::lock_guard lock(pool_mutex);
        if (!pool().empty()) {
            unsigned char* p = pool().back();
            pool().pop_back();
            return p;
        }
    }
    void* p = std::aligned_alloc(AlignedWrites::kAlign, AlignedWrites::kPieceBytes);
    if (!p) throw std::bad_alloc();
    return static_cast<unsigned char*>(p);
}

void return_bounce_buffer(unsigned char* p) {
    std::lock_guard lock(pool_mutex);
    if (pool().size() < kPoolMax) pool().push_back(p);
    else std::free(p);
}

namespace {

// Writes all of [p, p + bytes) at offset; returns 0 or the errno of the failure.
int pwrite_all(int fd, const unsigned char* p, std::size_t bytes, std::uint64_t offset) {
    for (std::size_t w = 0; w < bytes;) {
        const ssize_t k = ::pwrite(fd, p + w, bytes - w, static_cast<off_t>(offset + w));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return errno;
        if (k == 0) return EIO;
        w += static_cast<std::size_t>(k);
    }
    return 0;
}

}  // namespace

AlignedWrites::AlignedWrites(int fd_direct, int fd_buffered, std::string file)
    : fd_direct_(fd_direct), fd_buffered_(fd_buffered), file_(std::move(file)) {
    try {
        for (int i = 0; i < kThreads; ++i) threads_.emplace_back([this](std::stop_token stop) { loop(stop); });
    } catch (const std::system_error&) {
        // Fewer threads (none: submit() writes inline).
    }
}

AlignedWrites::~AlignedWrites() {
    {
        std::lock_guard lock(mutex_);
        queue_.clear();  // not written: the save is being abandoned
    }
    for (auto& t : threads_) t.request_stop();
    cv_.notify_all();
    threads_.clear();  // joins; a write in progress finishes first
    for (unsigned char* p : owned_) return_bounce_buffer(p);
}

unsigned char* AlignedWrites::acquire() {
    std::unique_lock lock(mutex_);
    if (free_.empty() && static_cast<int>(owned_.size()) < kBuffers) {
        unsigned char* p = take_bounce_buffer();
        owned_.push_back(p);
        return p;
    }
    if (!threads_.empty())
        wait_cv(cv_, lock, [&] { return !free_.empty() || error_; }, "the checkpoint's direct-I/O writers");
    if (error_) std::rethrow_exception(error_);
    unsigned char* p = free_.back();
    free_.pop_back();
    return p;
}

void AlignedWrites::submit(const unsigned char* p, std::size_t bytes, std::uint64_t offset, bool bounce) {
    const Piece piece{p, bytes, offset, bounce};
    if (threads_.empty()) {
        write_piece(piece);
        std::lock_guard lock(mutex_);
        if (bounce) free_.push_back(const_cast<unsigned char*>(p));
        if (error_) std::rethrow_exception(error_);
        return;
    }
    {
        std::lock_guard lock(mutex_);
        if (error_) std::rethrow_exception(error_);
        queue_.push_back(piece);
    }
    cv_.notify_all();
}

void AlignedWrites::write_piece(const Piece& piece) {
    bool direct;
    {
        std::lock_guard lock(mutex_);
        direct = direct_ok_;
    }
    int err = direct ? pwrite_all(fd_direct_, piece.p, piece.bytes, piece.offset) : 0;
    if (direct && err == EINVAL) {
        // The file system wants another alignment (or no direct I/O after all): buffered
        // from now on. What the direct write did get out is rewritten, the same bytes.
        std::lock_guard lock(mutex_);
        direct_ok_ = false;
        direct = false;
    }
    if (!direct) err = pwrite_all(fd_buffered_, piece.p, piece.bytes, piece.offset);
    std::lock_guard lock(mutex_);
    if (err != 0) {
        if (!error_)
            error_ = std::make_exception_ptr(IoError(
                "writing checkpoint file " + file_ + " failed: " + std::strerror(err) + " (" +
                std::to_string(piece.bytes) + " bytes at offset " + std::to_string(piece.offset) + ")"));
        return;
    }
    (direct ? direct_bytes_ : fallback_bytes_) += piece.bytes;
}

void AlignedWrites::loop(std::stop_token stop) {
    std::unique_lock lock(mutex_);
    while (true) {
        if (!cv_.wait(lock, stop, [&] { return !queue_.empty(); })) return;  // stop requested
        const Piece piece = queue_.front();
        queue_.pop_front();
        ++busy_;
        const bool skip = error_ != nullptr;
        lock.unlock();
        if (!skip) write_piece(piece);
        lock.lock();
        --busy_;
        if (piece.bounce) free_.push_back(const_cast<unsigned char*>(piece.p));
        cv_.notify_all();
    }
}

void AlignedWrites::finish() {
    std::unique_lock lock(mutex_);
    if (!threads_.empty())
        wait_cv(cv_, lock, [&] { return queue_.empty() && busy_ == 0; }, "the checkpoint's direct-I/O writers");
    if (error_) std::rethrow_exception(error_);
}

}  // namespace gpt::ckpt
