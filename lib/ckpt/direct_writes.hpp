// The data path of a save: each rank's pieces of the contiguous datasets, written with
// plain pwrite() at the byte offsets that HDF5 allocated for them when the datasets were
// created (contiguous layout, allocated early, never filled: HDF5 itself never touches
// these bytes). No MPI and no HDF5 here, so the writes can run on a helper thread while
// training goes on (--async-save): the main thread keeps every collective and every HDF5
// call (creating datasets before, the manifest and attributes after).
// Each run is checksummed on the checksum worker while this thread writes it. The whole
// pages of each run go to the disk with O_DIRECT through reused bounce buffers
// (AlignedWrites: no page cache, whose fresh pages cost more than the disk here); the
// partial pages at a run's ends, and everything on a file system without direct I/O, are
// written through the page cache, their write-back started at once (EarlyWriteback).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stop_token>
#include <string>
#include <vector>

namespace gpt::ckpt {

class ChecksumWorker;

class DirectWrites {
public:
    // direct = false: every byte through the page cache (the tests compare both paths).
    explicit DirectWrites(std::string file, bool direct = true) : file_(std::move(file)), direct_(direct) {}

    // `bytes` of `data` go to `file_offset`; they are bytes [data_offset, data_offset +
    // bytes) of manifest entry `entry`'s dataset, for its checksum. `data` must stay valid
    // and unchanged until run() returns.
    void add(std::size_t entry, std::uint64_t file_offset, std::uint64_t data_offset, const void* data,
             std::size_t bytes);

    // Writes everything added so far and clears the list; adds each entry's partial checksum
    // to sums[entry] (sums must be large enough). With a worker, pieces are summed on its
    // thread while this one writes (the caller calls worker->finish() before reading sums).
    // durable: fdatasync at the end, so this rank's bytes are on disk when run() returns.
    // Throws IoError with the system's reason (e.g. "No space left on device") and the
    // file; when `stop` is requested it stops between pieces and throws IoError too.
    void run(std::vector<std::uint64_t>& sums, bool durable, std::stop_token stop = {},
             ChecksumWorker* worker = nullptr);

    std::uint64_t pending_bytes() const { return pending_bytes_; }
    bool empty() const { return runs_.empty(); }
    // What the last run() wrote with O_DIRECT and through the page cache.
    std::uint64_t direct_bytes() const { return direct_bytes_; }
    std::uint64_t buffered_bytes() const { return buffered_bytes_; }
    // Whole pages handed to the O_DIRECT writers straight from the caller's memory (no bounce copy):
    // runs whose memory and file offset lie at the same place within a page.
    std::uint64_t in_place_bytes() const { return in_place_bytes_; }

private:
    struct Run {
        std::size_t entry;
        std::uint64_t file_offset, data_offset;
        const unsigned char* data;
        std::size_t bytes;
    };
    std::string file_;
    bool direct_ = true;
    std::vector<Run> runs_;
    std::uint64_t direct_bytes_ = 0, buffered_bytes_ = 0, in_place_bytes_ = 0;
    std::uint64_t pending_bytes_ = 0;
};

}  // namespace gpt::ckpt
