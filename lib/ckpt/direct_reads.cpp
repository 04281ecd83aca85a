#include "ckpt/direct_reads.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ckpt/aligned_reads.hpp"
#include "ckpt/aligned_writes.hpp"
#include "ckpt/checksum.hpp"
#include "ckpt/checksum_worker.hpp"
#include "ckpt/dataset_io.hpp"
#include "ckpt/profile.hpp"
#include "core/errors.hpp"

namespace gpt::ckpt {

namespace {
// A run shorter than this is a candidate for a window; the gap a window may swallow.
// 256 KiB: a pread of that size costs about what its syscall and page-cache walk cost, so
// reading a gap of that size (other ranks' bytes, or cached already) is no loss.
constexpr std::size_t kSmallRun = std::size_t(256) << 10;
constexpr std::uint64_t kMaxGap = std::uint64_t(256) << 10;
// A run as a flat byte range of a 1-D "tensor" for the checksum worker.
const Shape kBytes{std::numeric_limits<std::int64_t>::max()};
}  // namespace

void DirectReads::add(std::size_t entry, const std::string* name, std::uint64_t file_offset,
                      std::uint64_t data_offset, void* dest, std::size_t bytes) {
    if (bytes == 0) return;
    auto* d = static_cast<unsigned char*>(dest);
    if (!runs_.empty()) {  // row slices that touch: one run
        Run& last = runs_.back();
        if (last.entry == entry && last.file_offset + last.bytes == file_offset && last.dest + last.bytes == d) {
            last.bytes += bytes;
            return;
        }
    }
    runs_.push_back({entry, name, file_offset, data_offset, d, bytes});
}

int DirectReads::open_file() const {
    const int fd = ::open(file_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) GPT_THROW(IoError, "cannot open checkpoint file ", file_, " for reading: ", std::strerror(errno));
    // Advice only: a file system that ignores it reads as before.
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return fd;
}

void DirectReads::read_exact(int fd, const std::string& name, std::uint64_t offset, void* dest,
                             std::size_t bytes) const {
    auto* p = static_cast<unsigned char*>(dest);
    for (std::size_t done = 0; done < bytes;) {
        const ssize_t k = ::pread(fd, p + done, bytes - done, static_cast<off_t>(offset + done));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0)
            GPT_THROW(IoError, "reading dataset '", name, "' of checkpoint file ", file_, " failed: ",
                      std::strerror(errno), " (", bytes - done, " bytes at offset ", offset + done, ")");
        if (k == 0)
            GPT_THROW(DataError, "checkpoint file ", file_, " ends inside dataset '", name, "' (at byte ",
                      offset + done, "): the file is truncated");
        done += static_cast<std::size_t>(k);
    }
}

namespace {
struct Closer {
    int fd;
    ~Closer() {
        if (fd >= 0) ::close(fd);
    }
};
}  // namespace

void DirectReads::run(std::vector<std::uint64_t>* sums, ChecksumWorker* worker) {
    std::vector<Run> runs;
    runs.swap(runs_);
    if (runs.empty()) return;
    // File order: one sweep over the disk, whatever order the tensors came in.
    std::stable_sort(runs.begin(), runs.end(),
                     [](const Run& a, const Run& b) { return a.file_offset < b.file_offset; });
    // The reads: a piece of <= 4 MiB of one run (straight into its buffer), or a window of
    // small runs read into staging (first..last runs).
    struct Read {
        std::uint64_t offset;
        std::size_t bytes;
        std::size_t first, last;  // runs; first == last: direct
        std::size_t in_run;       // direct: byte offset inside the run
    };
    std::vector<Read> reads;
    for (std::size_t i = 0; i < runs.size();) {
        const Run& r = runs[i];
        std::size_t j = i + 1;
        std::uint64_t end = r.file_offset + r.bytes;
        if (r.bytes < kSmallRun)
            while (j < runs.size() && runs[j].bytes < kSmallRun && runs[j].file_offset >= end &&
                   runs[j].file_offset - end <= kMaxGap &&
                   runs[j].file_offset + runs[j].bytes - r.file_offset <= kIoChunkBytes) {
                end = runs[j].file_offset + runs[j].bytes;
                ++j;
            }
        if (j == i + 1) {
            for (std::size_t done = 0; done < r.bytes; done += kIoChunkBytes)
                reads.push_back({r.file_offset + done, std::min(kIoChunkBytes, r.bytes - done), i, i, done});
        } else {
            reads.push_back({r.file_offset, static_cast<std::size_t>(end - r.file_offset), i, j - 1, 0});
        }
        i = j;
    }

    const int fd = open_file();
    Closer closer{fd};
    // The whole pages of the single-run pieces: read with O_DIRECT ahead of this thread
    // (AlignedReads), unless the file system has no direct I/O (EINVAL: read buffered).
    constexpr std::size_t kAlign = AlignedReads::kAlign;
    const int fd_direct = direct_ ? ::open(file_.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC) : -1;
    Closer closer_direct{fd_direct};
    std::vector<AlignedReads::Request> requests;
    std::vector<std::size_t> request_of(reads.size(), SIZE_MAX);
    if (fd_direct >= 0)
        for (std::size_t k = 0; k < reads.size(); ++k) {
            const Read& rd = reads[k];
            if (rd.first != rd.last) continue;
            const std::uint64_t a = (rd.offset + kAlign - 1) / kAlign * kAlign;
            const std::uint64_t b = (rd.offset + rd.bytes) / kAlign * kAlign;
            if (b < a + AlignedWrites::kMinDirectBytes) continue;  // small: buffered, as writes are
            request_of[k] = requests.size();
            requests.push_back({a, static_cast<std::size_t>(b - a)});
        }
    // Declared after the descriptors: its threads stop before they are closed.
    AlignedReads aligned(fd_direct, fd, file_, requests);
    std::vector<unsigned char> staging;
    std::size_t hinted = 0;
    std::uint64_t hinted_bytes = 0, done_bytes = 0;
    for (std::size_t k = 0; k < reads.size(); ++k) {
        const Read& rd = reads[k];
        // Keep readahead_ bytes of this rank's coming buffered pieces on their way from the
        // disk. (WILLNEED submits the reads and may wait for the disk's queue: counted as
        // reading.) Not for direct pieces: that would fill the page cache they avoid.
        PhaseTimer hint_timer(Phase::LoadRead);
        while (readahead_ > 0 && hinted < reads.size() && hinted_bytes < done_bytes + readahead_) {
            if (request_of[hinted] == SIZE_MAX)
                (void)::posix_fadvise(fd, static_cast<off_t>(reads[hinted].offset),
                                      static_cast<off_t>(reads[hinted].bytes), POSIX_FADV_WILLNEED);
            hinted_bytes += reads[hinted].bytes;
            ++hinted;
        }
        hint_timer.stop();
        if (rd.first == rd.last) {
            const Run& r = runs[rd.first];
            unsigned char* dest = r.dest + rd.in_run;
            if (request_of[k] == SIZE_MAX) {
                PhaseTimer t(Phase::LoadRead);
                read_exact(fd, *r.name, rd.offset, dest, rd.bytes);
            } else {
                const AlignedReads::Request& q = requests[request_of[k]];
                const std::size_t head = static_cast<std::size_t>(q.offset - rd.offset);
                const std::size_t tail = rd.bytes - head - q.bytes;
                PhaseTimer t(Phase::LoadRead);
                if (head > 0) read_exact(fd, *r.name, rd.offset, dest, head);
                std::size_t got = 0;
                const unsigned char* src = aligned.get(request_of[k], &got);
                if (got < q.bytes)
                    GPT_THROW(DataError, "checkpoint file ", file_, " ends inside dataset '", *r.name, "' (at byte ",
                              q.offset + got, "): the file is truncated");
                t.stop();
                {
                    PhaseTimer c(Phase::LoadScatter);
                    std::memcpy(dest + head, src, q.bytes);
                }
                aligned.release(request_of[k]);
                PhaseTimer t2(Phase::LoadRead);
                if (tail > 0) read_exact(fd, *r.name, q.offset + q.bytes, dest + head + q.bytes, tail);
            }
            if (sums && worker) {
                worker->add(&(*sums)[r.entry], kBytes,
                            Selection::flat(static_cast<std::int64_t>(r.data_offset + rd.in_run),
                                            static_cast<std::int64_t>(rd.bytes)),
                            1, dest);
            } else if (sums) {
                PhaseTimer t(Phase::LoadVerify);
                (*sums)[r.entry] = checksum_add((*sums)[r.entry], checksum_bytes(r.data_offset + rd.in_run, dest, rd.bytes));
            }
        } else {
            staging.resize(rd.bytes);
            {
                PhaseTimer t(Phase::LoadRead);
                read_exact(fd, *runs[rd.first].name, rd.offset, staging.data(), rd.bytes);
            }
            for (std::size_t j = rd.first; j <= rd.last; ++j) {
                const Run& r = runs[j];
                const unsigned char* src = staging.data() + (r.file_offset - rd.offset);
                {
                    PhaseTimer t(Phase::LoadScatter);
                    std::memcpy(r.dest, src, r.bytes);
                }
                if (sums) {  // small and cached: inline, no hand-off per run
                    PhaseTimer t(Phase::LoadVerify);
                    (*sums)[r.entry] = checksum_add((*sums)[r.entry], checksum_bytes(r.data_offset, src, r.bytes));
                }
            }
        }
        done_bytes += rd.bytes;
    }
    direct_bytes_ = aligned.direct_bytes();
}

void DirectReads::checksum_range(const std::string& name, std::uint64_t file_offset, std::uint64_t data_offset,
                                 std::uint64_t bytes, std::uint64_t* sum, ChecksumWorker& worker) {
    if (bytes == 0) return;
    const int fd = open_file();
    Closer closer{fd};
    // Piece k goes to buffer k % ring while the worker sums the earlier ones; before reusing
    // a buffer, at most ring - 1 pieces may still be queued (the worker sums in order).
    constexpr std::size_t kRing = 4;
    std::array<std::vector<unsigned char>, kRing> ring;
    std::uint64_t hinted = 0;
    try {
    for (std::uint64_t done = 0, k = 0; done < bytes; done += kIoChunkBytes, ++k) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kIoChunkBytes, bytes - done));
        if (readahead_ > 0 && hinted < std::min(bytes, done + readahead_)) {
            PhaseTimer t(Phase::LoadRead);
            const std::uint64_t to = std::min(bytes, done + readahead_);
            (void)::posix_fadvise(fd, static_cast<off_t>(file_offset + hinted), static_cast<off_t>(to - hinted),
                                  POSIX_FADV_WILLNEED);
            hinted = to;
        }
        {
            PhaseTimer t(Phase::LoadVerifyWait);
            worker.wait_pending(kRing - 1);
        }
        std::vector<unsigned char>& buf = ring[k % kRing];
        buf.resize(n);
        {
            PhaseTimer t(Phase::LoadRead);
            read_exact(fd, name, file_offset + done, buf.data(), n);
        }
        worker.add(sum, kBytes, Selection::flat(static_cast<std::int64_t>(data_offset + done), static_cast<std::int64_t>(n)),
                   1, buf.data());
    }
    } catch (...) {
        // The worker may still be summing a ring buffer: let it finish before they go.
        try {
            worker.finish();
        } catch (...) {
        }
        throw;
    }
    PhaseTimer t(Phase::LoadVerifyWait);
    worker.finish();  // the ring goes out of scope here
}

}  // namespace gpt::ckpt
