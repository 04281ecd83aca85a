#include "ckpt/direct_reads.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ckpt/aligned_reads.hpp"
#include "ckpt/checksum.hpp"
#include "ckpt/checksum_worker.hpp"
#include "ckpt/profile.hpp"
#include "ckpt/selection.hpp"
#include "core/errors.hpp"

namespace gpt::ckpt {

namespace {
// A run as a flat byte range of a 1-D "tensor" for the checksum worker.
const Shape kBytes{std::numeric_limits<std::int64_t>::max()};

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
    const std::vector<Read> reads = plan(runs);

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
        check_complete(runs, rd, got);
        read_timer.stop();
        deliver(runs, rd, page, sums, worker);
        aligned.release(k);
        done_bytes += rd.hi - rd.lo;
    }
    direct_bytes_ = aligned.direct_bytes();
}

void DirectReads::check_complete(const std::vector<Run>& runs, const Read& rd, std::size_t got) const {
    if (rd.lo + got >= rd.end) return;
    // The file ends inside this read: name the run the end falls in.
    const std::uint64_t at = rd.lo + got;
    std::size_t j = rd.first;
    while (j < rd.last && runs[j].file_offset + runs[j].bytes <= at) ++j;
    GPT_THROW(DataError, "checkpoint file ", file_, " ends inside dataset '", *runs[j].name, "' (at byte ", at,
              "): the file is truncated");
}

void DirectReads::deliver(const std::vector<Run>& runs, const Read& rd, const unsigned char* page,
                          std::vector<std::uint64_t>* sums, ChecksumWorker* worker) {
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
                            Selection::flat(static_cast<std::int64_t>(at), static_cast<std::int64_t>(rd.bytes)), 1,
                            dest);
            } else if (sums) {
                PhaseTimer t(Phase::LoadVerify);
                (*sums)[r.entry] = checksum_add((*sums)[r.entry], checksum_bytes(at, dest, rd.bytes));
            }
        } else if (sums) {  // verification: summed here while the threads read ahead
            PhaseTimer t(Phase::LoadVerify);
            (*sums)[r.entry] = checksum_add((*sums)[r.entry], checksum_bytes(at, src, rd.bytes));
        }
        return;
    }
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

}  // namespace gpt::ckpt
