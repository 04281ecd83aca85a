#include "ckpt/direct_reads.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ckpt/aligned_reads.hpp"
#include "ckpt/aligned_writes.hpp"
#include "ckpt/checksum.hpp"
#include "ckpt/checksum_worker.hpp"
#include "ckpt/profile.hpp"
#include "ckpt/selection.hpp"
#include "core/errors.hpp"

namespace gpt::ckpt {

namespace {
constexpr std::uint64_t kAlign = AlignedReads::kAlign;
// Bytes per read (the covering pages; at most a bounce buffer's kPieceBytes): virtio's
// largest request, the size at which dd with O_DIRECT reads at the disk's full speed with
// one request in flight; small enough that the checksum worker finds a piece just copied
// out still in the cache.
constexpr std::uint64_t kReadBytes = std::uint64_t{4} << 20;
static_assert(kReadBytes <= AlignedWrites::kPieceBytes);
// A run shorter than this is a candidate for a window.
constexpr std::size_t kSmallRun = std::size_t(256) << 10;
// The gap a window may swallow. Each rank reads its own windows with O_DIRECT, the other
// ranks' rows in the gaps included, rather than one rank per node reading each window for
// all (through the page cache or a node-shared buffer). With T ranks splitting a tensor's
// rows, a window of W bytes holds W/T of this rank's:
//  - shared through the page cache, the node reads W once, but into W of fresh page-cache
//    pages at host-fault speed (0.4 GB/s here, measured one thread at a time);
//  - per rank with O_DIRECT, the node's disk reads T*W at its speed (5 GB/s here, dd).
//    That is faster while T*W/5 < W/0.4, i.e. T < ~12, if the host serves the faults of
//    the node's ranks one at a time; if it served them all in parallel, T < ~3.5;
//  - one reader per node into a node-shared buffer would read W once at the disk's speed,
//    but needs MPI shared memory in this MPI-free layer and makes the ranks of a node wait
//    for each other per window (the load is otherwise independent per rank): not done.
// 256 KiB reads in ~50 us at 5 GB/s, about one request's latency: smaller gaps are cheaper
// to read than to skip.
// Not settled by measurement yet: at 2 ranks (ckpt_bench DIR 2 512: 44 MB per rank, row
// slices of 512 B and 2 KiB) on 2 cores loaded by builds (load average 5-6), the read phase
// took 0.09-0.25 s this way and 0.03-0.05 s with buffered windows (4 runs each), at a size
// where thread hand-offs, not bytes, dominate; bench/checkpoint/run.sh at 2 ranks on an idle
// machine decides.
constexpr std::uint64_t kMaxGap = std::uint64_t(256) << 10;
// A run as a flat byte range of a 1-D "tensor" for the checksum worker.
const Shape kBytes{std::numeric_limits<std::int64_t>::max()};

std::uint64_t floor_page(std::uint64_t x) { return x / kAlign * kAlign; }
std::uint64_t ceil_page(std::uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

struct Closer {
    int fd;
    ~Closer() {
        if (fd >= 0) ::close(fd);
    }
};
}  // namespace

void DirectReads::add(std::size_t entry, const std::string* name, std::uint64_t file_offset,
                      std::uint64_t data_offset, void* dest, std::size_t bytes) {
    if (bytes == 0) return;
    auto* d = static_cast<unsigned char*>(dest);
    if (!runs_.empty()) {  // row slices that touch: one run
        Run& last = runs_.back();
        const bool dest_follows = last.dest == nullptr ? d == nullptr : d != nullptr && last.dest + last.bytes == d;
        if (last.entry == entry && last.file_offset + last.bytes == file_offset && dest_follows) {
            last.bytes += bytes;
            return;
        }
    }
    runs_.push_back({entry, name, file_offset, data_offset, d, bytes});
}

void DirectReads::run(std::vector<std::uint64_t>* sums, ChecksumWorker* worker) {
    std::vector<Run> runs;
    runs.swap(runs_);
    direct_bytes_ = 0;
    if (runs.empty()) return;
    // File order: one sweep over the disk, whatever order the tensors came in.
    std::stable_sort(runs.begin(), runs.end(),
                     [](const Run& a, const Run& b) { return a.file_offset < b.file_offset; });
    // The reads, each the whole pages [lo, hi) covering what it needs (at most kReadBytes): a
    // piece of one run (first == last; `in_run` bytes into it), or a window of small runs
    // first..last whole.
    struct Read {
        std::uint64_t lo, hi, end;  // end: the last byte it needs + 1
        std::size_t first, last;
        std::size_t in_run, bytes;  // the piece of a single run
    };
    std::vector<Read> reads;
    for (std::size_t i = 0; i < runs.size();) {
        const Run& r = runs[i];
        std::size_t j = i + 1;
        std::uint64_t end = r.file_offset + r.bytes;
        if (r.bytes < kSmallRun)
            while (j < runs.size() && runs[j].bytes < kSmallRun && runs[j].file_offset >= end &&
                   runs[j].file_offset - end <= kMaxGap &&
                   ceil_page(runs[j].file_offset + runs[j].bytes) - floor_page(r.file_offset) <= kReadBytes) {
                end = runs[j].file_offset + runs[j].bytes;
                ++j;
            }
        if (j > i + 1) {
            reads.push_back({floor_page(r.file_offset), ceil_page(end), end, i, j - 1, 0, 0});
        } else {
            // Pieces whose covering pages are at most kReadBytes: the first up to kReadBytes
            // after its first page, the others page-aligned.
            for (std::size_t done = 0; done < r.bytes;) {
                const std::uint64_t start = r.file_offset + done;
                const std::uint64_t lo = floor_page(start);
                const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(r.bytes - done, lo + kReadBytes - start));
                reads.push_back({lo, ceil_page(start + n), start + n, i, i, done, n});
                done += n;
            }
        }
        i = j;
    }

    const int fd = ::open(file_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) GPT_THROW(IoError, "cannot open checkpoint file ", file_, " for reading: ", std::strerror(errno));
    Closer closer{fd};
    // EINVAL here: no direct I/O on this file system; AlignedReads then reads buffered.
    const int fd_direct = direct_ ? ::open(file_.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC) : -1;
    Closer closer_direct{fd_direct};
    // Advice only, for the buffered reads (a file system that ignores it reads as before).
    if (fd_direct < 0) (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    std::vector<AlignedReads::Request> requests;
    requests.reserve(reads.size());
    for (const Read& rd : reads) requests.push_back({rd.lo, static_cast<std::size_t>(rd.hi - rd.lo)});
    // Declared after the descriptors: its threads stop before they are closed.
    AlignedReads aligned(fd_direct, fd, file_, requests);

    std::size_t hinted = 0;
    std::uint64_t hinted_bytes = 0, done_bytes = 0;
    for (std::size_t k = 0; k < reads.size(); ++k) {
        const Read& rd = reads[k];
        PhaseTimer read_timer(Phase::LoadRead);
        // Buffered (no O_DIRECT here): keep readahead_ bytes of the coming reads on their way
        // from the disk. (WILLNEED submits the reads and may wait for the disk's queue.)
        // Not for direct reads: that would fill the page cache they avoid.
        while (fd_direct < 0 && readahead_ > 0 && hinted < reads.size() && hinted_bytes < done_bytes + readahead_) {
            (void)::posix_fadvise(fd, static_cast<off_t>(reads[hinted].lo),
                                  static_cast<off_t>(reads[hinted].hi - reads[hinted].lo), POSIX_FADV_WILLNEED);
            hinted_bytes += reads[hinted].hi - reads[hinted].lo;
            ++hinted;
        }
        std::size_t got = 0;
        const unsigned char* page = aligned.get(k, &got);
        if (rd.lo + got < rd.end) {
            // The file ends inside this read: name the run the end falls in.
            const std::uint64_t at = rd.lo + got;
            std::size_t j = rd.first;
            while (j < rd.last && runs[j].file_offset + runs[j].bytes <= at) ++j;
            GPT_THROW(DataError, "checkpoint file ", file_, " ends inside dataset '", *runs[j].name, "' (at byte ",
                      at, "): the file is truncated");
        }
        read_timer.stop();
        if (rd.first == rd.last) {
            const Run& r = runs[rd.first];
            const unsigned char* src = page + (r.file_offset + rd.in_run - rd.lo);
            const std::uint64_t at = r.data_offset + rd.in_run;
            if (r.dest != nullptr) {
                unsigned char* dest = r.dest + rd.in_run;
                {
                    PhaseTimer c(Phase::LoadScatter);
                    std::memcpy(dest, src, rd.bytes);
                }
                if (sums && worker) {
                    worker->add(&(*sums)[r.entry], kBytes,
                                Selection::flat(static_cast<std::int64_t>(at), static_cast<std::int64_t>(rd.bytes)),
                                1, dest);
                } else if (sums) {
                    PhaseTimer t(Phase::LoadVerify);
                    (*sums)[r.entry] = checksum_add((*sums)[r.entry], checksum_bytes(at, dest, rd.bytes));
                }
            } else if (sums) {  // verification: summed here while the threads read ahead
                PhaseTimer t(Phase::LoadVerify);
                (*sums)[r.entry] = checksum_add((*sums)[r.entry], checksum_bytes(at, src, rd.bytes));
            }
        } else {
            for (std::size_t j = rd.first; j <= rd.last; ++j) {
                const Run& r = runs[j];
                const unsigned char* src = page + (r.file_offset - rd.lo);
                if (r.dest != nullptr) {
                    PhaseTimer t(Phase::LoadScatter);
                    std::memcpy(r.dest, src, r.bytes);
                }
                if (sums) {  // small and cached: inline, no hand-off per run
                    PhaseTimer t(Phase::LoadVerify);
                    (*sums)[r.entry] = checksum_add((*sums)[r.entry], checksum_bytes(r.data_offset, src, r.bytes));
                }
            }
        }
        aligned.release(k);
        done_bytes += rd.hi - rd.lo;
    }
    direct_bytes_ = aligned.direct_bytes();
}

}  // namespace gpt::ckpt
