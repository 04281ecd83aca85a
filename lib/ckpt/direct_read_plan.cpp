// DirectReads::run, step 1: the plan. A rank's runs in file order (one sweep over the disk)
// and the reads covering them: how many bytes per request and which small runs share one
// read are decided here, before any file is opened.
#include <algorithm>
#include <cstdint>

#include "ckpt/aligned_reads.hpp"
#include "ckpt/aligned_writes.hpp"
#include "ckpt/direct_reads.hpp"

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
std::uint64_t floor_page(std::uint64_t x) { return x / kAlign * kAlign; }
std::uint64_t ceil_page(std::uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
}  // namespace

std::vector<DirectReads::Read> DirectReads::plan(std::vector<Run>& runs) {
    // File order: one sweep over the disk, whatever order the tensors came in.
    std::stable_sort(runs.begin(), runs.end(),
                     [](const Run& a, const Run& b) { return a.file_offset < b.file_offset; });
    // The reads, each the whole pages [lo, hi) covering what it needs (at most kReadBytes).
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
    return reads;
}

}  // namespace gpt::ckpt
