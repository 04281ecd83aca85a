// The data path of a load: each rank's pieces of the contiguous datasets, read with plain
// pread() at the byte offsets HDF5 reports for them (H5Dget_offset, recorded when the file
// is opened); HDF5/MPI-IO keep the metadata. The mirror of DirectWrites: no MPI and no
// HDF5 here. What it does for the disk's speed:
//  - all of a rank's pieces are read in file order, in 4 MiB preads straight into the
//    caller's buffers (no staging copy, no datatype conversion, no ROMIO data sieving);
//  - the kernel is told the access is sequential and asked to read ahead of the current
//    piece (posix_fadvise SEQUENTIAL, WILLNEED), so the disk stays busy while this thread
//    copies and the checksum worker sums;
//  - each piece is checksummed on the worker thread right after it arrived, still cached;
//  - small strided runs (row-parallel slices: one run per row) are not read one syscall
//    each: runs separated by small gaps are read as one window into a staging buffer and
//    copied out (the other ranks on the node read the gaps, from the page cache).
// The whole pages of big pieces are read with O_DIRECT into reused bounce buffers, two
// threads ahead of this one (AlignedReads: a fresh page-cache page costs more than the disk
// on our VMs), and copied out; their partial end pages, the windows of small strided runs
// (which the ranks of a node share through the page cache) and everything on a file system
// without direct I/O are read buffered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpt::ckpt {

class ChecksumWorker;

class DirectReads {
public:
    // direct = false: every byte through the page cache (the tests compare both paths).
    explicit DirectReads(std::string file, std::uint64_t readahead_bytes = std::uint64_t{16} << 20, bool direct = true)
        : file_(std::move(file)), readahead_(readahead_bytes), direct_(direct) {}

    // Bytes [data_offset, data_offset + bytes) of manifest entry `entry`'s dataset (named
    // `name`, for messages; it must outlive run()) lie at `file_offset`; they go to `dest`.
    void add(std::size_t entry, const std::string* name, std::uint64_t file_offset, std::uint64_t data_offset,
             void* dest, std::size_t bytes);
    bool empty() const { return runs_.empty(); }
    // What the last run() read with O_DIRECT.
    std::uint64_t direct_bytes() const { return direct_bytes_; }

    // Reads everything added (and clears the list). With sums, adds each piece's partial
    // checksum to (*sums)[entry]: on the worker's thread when one is given (the caller calls
    // worker->finish() before reading sums), else inline. Throws IoError with the system's
    // reason, DataError when the file ends early (naming the dataset).
    void run(std::vector<std::uint64_t>* sums, ChecksumWorker* worker);

    // Reads bytes [data_offset, data_offset + bytes) of an entry at file_offset through a
    // small ring of buffers, only to checksum them (a full verification pass), adding the
    // partial checksum to *sum on the worker's thread.
    void checksum_range(const std::string& name, std::uint64_t file_offset, std::uint64_t data_offset,
                        std::uint64_t bytes, std::uint64_t* sum, ChecksumWorker& worker);

private:
    struct Run {
        std::size_t entry;
        const std::string* name;
        std::uint64_t file_offset, data_offset;
        unsigned char* dest;
        std::size_t bytes;
    };
    int open_file() const;
    // Reads exactly `bytes` at `offset` into `dest` (EINTR and short reads retried).
    void read_exact(int fd, const std::string& name, std::uint64_t offset, void* dest, std::size_t bytes) const;

    std::string file_;
    std::uint64_t readahead_;
    bool direct_ = true;
    std::vector<Run> runs_;
    std::uint64_t direct_bytes_ = 0;
};

}  // namespace gpt::ckpt
