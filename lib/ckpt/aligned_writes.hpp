// O_DIRECT writes of a save's block-aligned bytes, from reused bounce buffers, on helper
// threads (internal to lib/ckpt; used by DirectWrites).
//
// Why not the page cache: a buffered write needs one free page of page cache per 4 KiB
// written. On a VM whose free memory is handed back to the host (virtio-balloon free page
// reporting, as on the machines we measure on), every such page is first touched at host
// fault speed: 0.4 GB/s on an idle machine, where the disk takes 1 GB/s. That was 2.7 s of a
// 1 GB save's 3.4 s inside pwrite(). dd's buffered figure looks faster only when it happens
// to get pages just freed by the previous run. Direct writes need no page cache pages: the
// bytes are copied once into a few bounce buffers that stay allocated (already touched)
// for the whole process, and the disk is kept busy by two writer threads (a synchronous
// direct write holds its thread until the device is done).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpt::ckpt {

// The process's bounce buffers (AlignedWrites::kPieceBytes, kAlign-aligned), shared by
// saves and loads: kept once touched, so that the next save or load does not fault them in
// again (a fresh 8 MiB costs 20 ms of host faults here).
unsigned char* take_bounce_buffer();
void return_bounce_buffer(unsigned char* p);

class AlignedWrites {
public:
    // File offsets, lengths and memory of direct writes are multiples of this: the page
    // size, so a direct write never shares a page with a buffered write of the same file
    // (HDF5's metadata, another rank's unaligned run ends), and it covers every device's
    // logical block size we know of (512 or 4096).
    static constexpr std::size_t kAlign = 4096;
    // Bytes per bounce buffer and direct write: the block layer splits it into max_sectors
    // requests (4 MiB on virtio), so one write keeps two of them in flight.
    static constexpr std::size_t kPieceBytes = std::size_t{8} << 20;
    // Bounce buffers per run: two being written, two being filled/queued.
    static constexpr int kBuffers = 4;
    static constexpr int kThreads = 2;
    // Runs with fewer whole pages go through the page cache: one synchronous device write
    // per small run (row-parallel slices: one run per row) would cost far more than the
    // page cache's copies, which it merges into large writes.
    static constexpr std::size_t kMinDirectBytes = std::size_t{256} << 10;

    // fd_direct: the file opened with O_DIRECT; fd_buffered: the same file without, used
    // for every piece once the file system refuses a direct write (EINVAL). Both stay
    // owned by the caller and open until finish() or the destructor returns.
    AlignedWrites(int fd_direct, int fd_buffered, std::string file);
    ~AlignedWrites();  // drops what is queued, waits for the writes in progress
    AlignedWrites(const AlignedWrites&) = delete;
    AlignedWrites& operator=(const AlignedWrites&) = delete;

    // A kPieceBytes bounce buffer (kAlign-aligned) to fill; waits while all are in use.
    // Rethrows a writer's error.
    unsigned char* acquire();
    // Writes `bytes` of `p` at `offset` on a writer thread (all three kAlign multiples).
    // `bounce`: p came from acquire() and goes back to the pool once written; otherwise it
    // is the caller's memory and must stay valid until finish() returns.
    void submit(const unsigned char* p, std::size_t bytes, std::uint64_t offset, bool bounce);
    // Waits for every submitted write; rethrows the first error (IoError naming the file).
    void finish();

    // Bytes written with O_DIRECT and bytes that fell back to buffered writes.
    std::uint64_t direct_bytes() const { return direct_bytes_; }
    std::uint64_t fallback_bytes() const { return fallback_bytes_; }

private:
    struct Piece {
        const unsigned char* p;
        std::size_t bytes;
        std::uint64_t offset;
        bool bounce;
    };
    void loop(std::stop_token stop);
    void write_piece(const Piece& piece);

    int fd_direct_, fd_buffered_;
    std::string file_;
    std::mutex mutex_;
    std::condition_variable_any cv_;
    std::deque<Piece> queue_;
    std::vector<unsigned char*> free_;  // this run's idle bounce buffers
    std::vector<unsigned char*> owned_; // every bounce buffer taken from the pool
    int busy_ = 0;                      // pieces being written
    bool direct_ok_ = true;             // false after the first EINVAL
    std::exception_ptr error_;
    std::uint64_t direct_bytes_ = 0, fallback_bytes_ = 0;
    std::vector<std::jthread> threads_;  // last: started after, stopped before the members they use
};

}  // namespace gpt::ckpt
