// O_DIRECT reads of a load's block-aligned pieces into reused bounce buffers, read ahead on
// helper threads (internal to lib/ckpt; used by DirectReads).
//
// The mirror of AlignedWrites: a buffered read needs a page-cache page per 4 KiB, and on a
// VM that hands free memory back to its host (virtio-balloon free page reporting) a fresh
// page is first touched at host-fault speed (0.4 GB/s idle), slower than the disk. Direct
// reads land in a few bounce buffers that stay allocated for the process; the caller
// copies each piece out (at memory speed) while the threads read the next ones.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ckpt/aligned_writes.hpp"

namespace gpt::ckpt {

class AlignedReads {
public:
    // Alignment, piece size, buffers and threads: AlignedWrites' (the same bounce buffers).
    static constexpr std::size_t kAlign = AlignedWrites::kAlign;

    struct Request {
        std::uint64_t offset;  // multiple of kAlign
        std::size_t bytes;     // multiple of kAlign, at most AlignedWrites::kPieceBytes
    };
    // Starts reading `requests` in order. fd_direct: the file with O_DIRECT (-1: none, the
    // open was refused or direct I/O is off); fd_buffered: without, used for every request
    // once a direct read is refused (EINVAL: the file system has no direct I/O or wants
    // another alignment). Both owned by the caller, open until the destructor returns.
    AlignedReads(int fd_direct, int fd_buffered, std::string file, std::vector<Request> requests);
    ~AlignedReads();  // stops the reads ahead and waits for those in progress
    AlignedReads(const AlignedReads&) = delete;
    AlignedReads& operator=(const AlignedReads&) = delete;

    // Request i's bytes, once read (call with i = 0, 1, 2, ... in order); valid until
    // release(i). Throws IoError with the system's reason; returns the bytes actually read
    // in *got (fewer at the end of the file).
    const unsigned char* get(std::size_t i, std::size_t* got);
    void release(std::size_t i);

    std::uint64_t direct_bytes() const { return direct_bytes_; }

    // For tests: while set, every direct read of the process fails with EINVAL, as on a file
    // system that opens with O_DIRECT but refuses the reads (the buffered fallback's case).
    static void refuse_direct_reads_for_testing(bool refuse);

private:
    struct Slot {
        unsigned char* buffer = nullptr;
        std::size_t got = 0;
        int error = 0;
        bool done = false;
    };
    void loop(std::stop_token stop);

    int fd_direct_, fd_buffered_;
    std::string file_;
    std::vector<Request> requests_;
    std::vector<Slot> slots_;
    std::mutex mutex_;
    std::condition_variable_any cv_;
    std::size_t next_ = 0;               // next request a thread takes
    std::vector<unsigned char*> free_;   // idle bounce buffers
    std::vector<unsigned char*> owned_;  // all of them (returned to the pool at the end)
    bool direct_ok_ = true;
    std::uint64_t direct_bytes_ = 0;
    std::vector<std::jthread> threads_;  // last: started after, stopped before the members they use
};

}  // namespace gpt::ckpt
