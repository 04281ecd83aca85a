#include "ckpt/direct_writes.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>

#include "ckpt/aligned_writes.hpp"
#include "ckpt/checkpoint_dir.hpp"
#include "ckpt/checksum.hpp"
#include "ckpt/checksum_worker.hpp"
#include "ckpt/dataset_io.hpp"
#include "ckpt/profile.hpp"
#include "core/errors.hpp"

namespace gpt::ckpt {

void DirectWrites::add(std::size_t entry, std::uint64_t file_offset, std::uint64_t data_offset, const void* data,
                       std::size_t bytes) {
    if (bytes == 0) return;
    // Runs of one dataset arrive in file order: join the ones that touch (row slices).
    if (!runs_.empty()) {
        Run& last = runs_.back();
        if (last.entry == entry && last.file_offset + last.bytes == file_offset &&
            last.data + last.bytes == static_cast<const unsigned char*>(data)) {
            last.bytes += bytes;
            pending_bytes_ += bytes;
            return;
        }
    }
    runs_.push_back({entry, file_offset, data_offset, static_cast<const unsigned char*>(data), bytes});
    pending_bytes_ += bytes;
}

namespace {

struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

void pwrite_exact(int fd, const std::string& file, const unsigned char* p, std::size_t n, std::uint64_t offset) {
    for (std::size_t w = 0; w < n;) {
        const ssize_t k = ::pwrite(fd, p + w, n - w, static_cast<off_t>(offset + w));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            GPT_THROW(IoError, "writing checkpoint file ", file, " failed: ", k < 0 ? std::strerror(errno) : "nothing written",
                      " (", n - w, " bytes at offset ", offset + w, ")");
        w += static_cast<std::size_t>(k);
    }
}

// How one run's bytes go to the file (the plan, worked out for every run before the file is
// opened): with O_DIRECT its whole pages, `middle` bytes after `head` bytes up to the first
// page boundary; the partial pages at its ends (shared with HDF5's metadata or another
// rank's run) through the page cache. middle == 0: the whole run through the page cache
// (too little to gain from direct I/O).
struct RunSplit {
    std::size_t head = 0, middle = 0;
};

RunSplit split_run(std::uint64_t file_offset, std::size_t bytes) {
    constexpr std::size_t kAlign = AlignedWrites::kAlign;
    RunSplit s;
    s.head = std::min<std::size_t>(bytes, (kAlign - file_offset % kAlign) % kAlign);
    s.middle = (bytes - s.head) / kAlign * kAlign;
    if (s.middle < AlignedWrites::kMinDirectBytes) s.middle = 0;
    return s;
}

}  // namespace

void DirectWrites::run(std::vector<std::uint64_t>& sums, bool durable, std::stop_token stop,
                       ChecksumWorker* worker) {
    std::vector<Run> runs;
    runs.swap(runs_);
    pending_bytes_ = 0;
    direct_bytes_ = buffered_bytes_ = in_place_bytes_ = 0;
    if (runs.empty() && !durable) return;
    // Plan: each run's split between direct and buffered writes.
    std::vector<RunSplit> splits;
    splits.reserve(runs.size());
    for (const Run& r : runs) splits.push_back(split_run(r.file_offset, r.bytes));

    // Execute: every run checksummed and written.
    Fd fd{::open(file_.c_str(), O_WRONLY | O_CLOEXEC)};
    if (fd.fd < 0) GPT_THROW(IoError, "cannot open checkpoint file ", file_, " for writing: ", std::strerror(errno));
    // EINVAL here: the file system has no direct I/O (tmpfs before Linux 6.6): buffered.
    Fd fd_direct{direct_ ? ::open(file_.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC) : -1};
    std::optional<AlignedWrites> aligned;
    if (fd_direct.fd >= 0) aligned.emplace(fd_direct.fd, fd.fd, file_);
    // Buffered writes only: start the write-back of each piece at once, so that the final
    // fsync does not wait for all of it (direct writes are on the device when they return).
    std::optional<EarlyWriteback> writeback;
    if (!aligned) writeback.emplace(file_);
    auto check_stop = [&] {
        if (stop.stop_requested())
            GPT_THROW(IoError, "save to ", file_, " stopped before it finished (the job is ending)");
    };
    auto buffered = [&](const unsigned char* p, std::size_t n, std::uint64_t offset) {
        PhaseTimer tw(Phase::SaveWrite);
        pwrite_exact(fd.fd, file_, p, n, offset);
        buffered_bytes_ += n;
        tw.stop();
        if (writeback) {
            PhaseTimer twb(Phase::SaveWriteback);
            writeback->start(offset, n);
        }
    };
    // A run as a flat byte range of a 1-D "tensor" for the checksum worker.
    static const Shape kBytes{std::numeric_limits<std::int64_t>::max()};
    for (std::size_t k = 0; k < runs.size(); ++k) {
        const Run& r = runs[k];
        // Checksums of the caller's bytes, in cache-sized pieces: on the worker's thread while
        // this one copies and writes, or here.
        for (std::size_t done = 0; done < r.bytes; done += kIoChunkBytes) {
            const std::size_t n = std::min(kIoChunkBytes, r.bytes - done);
            if (worker)
                worker->add(&sums[r.entry], kBytes,
                            Selection::flat(static_cast<std::int64_t>(r.data_offset + done), static_cast<std::int64_t>(n)),
                            1, r.data + done);
            else {
                PhaseTimer t(Phase::SaveChecksum);
                sums[r.entry] = checksum_add(sums[r.entry], checksum_bytes(r.data_offset + done, r.data + done, n));
            }
        }
        const std::size_t head = splits[k].head, middle = splits[k].middle;
        if (!aligned || middle == 0) {
            for (std::size_t done = 0; done < r.bytes; done += kIoChunkBytes) {
                check_stop();
                buffered(r.data + done, std::min(kIoChunkBytes, r.bytes - done), r.file_offset + done);
            }
            continue;
        }
        // Direct: the run's whole pages, in kPieceBytes writes; the partial pages at its ends
        // (shared with HDF5's metadata or another rank's run) buffered.
        if (head > 0) buffered(r.data, head, r.file_offset);
        const unsigned char* p = r.data + head;
        const std::uint64_t off = r.file_offset + head;
        // Caller's memory on a page boundary too: written from there, no copy.
        const bool in_place = reinterpret_cast<std::uintptr_t>(p) % AlignedWrites::kAlign == 0;
        if (in_place) in_place_bytes_ += middle;
        PhaseTimer tw(Phase::SaveWrite);
        for (std::size_t done = 0; done < middle;) {
            check_stop();
            const std::size_t n = std::min(AlignedWrites::kPieceBytes, middle - done);
            if (in_place) {
                aligned->submit(p + done, n, off + done, false);
            } else {
                unsigned char* buf = aligned->acquire();
                std::memcpy(buf, p + done, n);
                aligned->submit(buf, n, off + done, true);
            }
            done += n;
        }
        tw.stop();
        if (head + middle < r.bytes) buffered(p + middle, r.bytes - head - middle, off + middle);
    }

    // Verify: every direct write completed (AlignedWrites::finish throws the first failure),
    // then, when asked, this rank's bytes are on the disk.
    if (aligned) {
        PhaseTimer tw(Phase::SaveWrite);
        aligned->finish();
        direct_bytes_ = aligned->direct_bytes();
        buffered_bytes_ += aligned->fallback_bytes();
    }
    if (writeback) {
        PhaseTimer t(Phase::SaveWriteback);
        writeback->flush();
    }
    PhaseTimer t(Phase::SaveFsync);
    // Delayed allocation can report a full disk only here.
    if (durable && ::fdatasync(fd.fd) != 0)
        GPT_THROW(IoError, "flushing checkpoint file ", file_, " to disk failed: ", std::strerror(errno));
}

}  // namespace gpt::ckpt
