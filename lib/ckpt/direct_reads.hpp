// The data path of a load: each rank's pieces of the contiguous datasets, read at the byte
// offsets HDF5 reports for them (H5Dget_offset, recorded when the file is opened); HDF5/MPI-IO
// keep the metadata. The mirror of DirectWrites: no MPI and no HDF5 here.
//
// Every byte comes through O_DIRECT (AlignedReads): a buffered read needs a fresh page-cache
// page per 4 KiB, and on our VMs (virtio-balloon free page reporting) such a page is first
// touched at host-fault speed (0.4 GB/s idle), slower than the disk (about 5 GB/s). So:
//  - all of a rank's pieces are sorted into file order and read as whole aligned pages: the
//    pages covering each piece, at most 4 MiB per read, into the process's reused bounce
//    buffers, two threads reading ahead of this one, which copies each piece out (at
//    memory speed) and hands it to the checksum worker;
//  - small strided runs (row-parallel slices: one run per row) are not read one request each:
//    runs separated by small gaps are read as one window (the pages covering them) and copied
//    out. Each rank reads its own windows, gaps (other ranks' rows) included; see kMaxGap for
//    why that beats sharing one read per node through the page cache;
//  - a verification pass (entries added without a destination) reads the same way and sums
//    each piece straight out of the bounce buffer;
//  - a file system that refuses O_DIRECT (EINVAL at open or at the first read) gets the same
//    reads through the page cache, with posix_fadvise WILLNEED ahead of them.
// A file that ends early is a DataError naming the dataset; every other failure an IoError
// with the system's reason.
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
    // `name`, for messages; it must outlive run()) lie at `file_offset`; they go to `dest`,
    // or with dest == nullptr are only checksummed (a verification pass).
    void add(std::size_t entry, const std::string* name, std::uint64_t file_offset, std::uint64_t data_offset,
             void* dest, std::size_t bytes);
    bool empty() const { return runs_.empty(); }
    // What the last run() read with O_DIRECT (whole pages, gaps of windows included).
    std::uint64_t direct_bytes() const { return direct_bytes_; }

    // Reads everything added (and clears the list). With sums, adds each piece's partial
    // checksum to (*sums)[entry]: pieces of single runs with a destination on the worker's
    // thread when one is given (the caller calls worker->finish() before reading sums), the
    // rest (windows, verification pieces) inline from the bounce buffer. Throws IoError
    // with the system's reason, DataError when the file ends early (naming the dataset).
    void run(std::vector<std::uint64_t>* sums, ChecksumWorker* worker);

private:
    struct Run {
        std::size_t entry;
        const std::string* name;
        std::uint64_t file_offset, data_offset;
        unsigned char* dest;  // nullptr: checksum only
        std::size_t bytes;
    };
    // One read: the whole pages [lo, hi) covering what it needs (at most 4 MiB): a piece of one
    // run (first == last; `in_run` bytes into it), or a window of small runs first..last whole.
    struct Read {
        std::uint64_t lo, hi, end;  // end: the last byte it needs + 1
        std::size_t first, last;
        std::size_t in_run, bytes;  // the piece of a single run
    };
    // run() in three steps. Plan: `runs` sorted into file order, and the reads that cover
    // them (direct_read_plan.cpp: the window and piece sizes live there). Execute: the reads,
    // each handed out by deliver(). Verify: check_complete() after each read, before its
    // bytes are used.
    static std::vector<Read> plan(std::vector<Run>& runs);
    // The bytes of `rd` (at `page`, its first page) into the runs' destinations, each
    // piece's checksum added to sums (on the worker's thread where one is given).
    static void deliver(const std::vector<Run>& runs, const Read& rd, const unsigned char* page,
                        std::vector<std::uint64_t>* sums, ChecksumWorker* worker);
    // DataError naming the dataset when the file ended before `rd` got all it needs.
    void check_complete(const std::vector<Run>& runs, const Read& rd, std::size_t got) const;

    std::string file_;
    std::uint64_t readahead_;
    bool direct_ = true;
    std::vector<Run> runs_;
    std::uint64_t direct_bytes_ = 0;
};

}  // namespace gpt::ckpt
