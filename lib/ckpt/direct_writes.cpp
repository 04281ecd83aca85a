#include "ckpt/direct_writes.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

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

void DirectWrites::run(std::vector<std::uint64_t>& sums, bool durable, std::stop_token stop,
                       ChecksumWorker* worker) {
    std::vector<Run> runs;
    runs.swap(runs_);
    pending_bytes_ = 0;
    if (runs.empty() && !durable) return;
    const int fd = ::open(file_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) GPT_THROW(IoError, "cannot open checkpoint file ", file_, " for writing: ", std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    EarlyWriteback writeback(file_);
    // A run as a flat byte range of a 1-D "tensor" for the checksum worker.
    static const Shape kBytes{std::numeric_limits<std::int64_t>::max()};
    for (const Run& r : runs) {
        for (std::size_t done = 0; done < r.bytes;) {
            if (stop.stop_requested())
                GPT_THROW(IoError, "save to ", file_, " stopped before it finished (the job is ending)");
            const std::size_t n = std::min(kIoChunkBytes, r.bytes - done);
            const unsigned char* p = r.data + done;
            if (worker)
                worker->add(&sums[r.entry], kBytes,
                            Selection::flat(static_cast<std::int64_t>(r.data_offset + done), static_cast<std::int64_t>(n)),
                            1, p);
            else {
                PhaseTimer t(Phase::SaveChecksum);
                sums[r.entry] = checksum_add(sums[r.entry], checksum_bytes(r.data_offset + done, p, n));
            }
            PhaseTimer tw(Phase::SaveWrite);
            for (std::size_t w = 0; w < n;) {
                const ssize_t k = ::pwrite(fd, p + w, n - w, static_cast<off_t>(r.file_offset + done + w));
                if (k < 0 && errno == EINTR) continue;
                if (k <= 0)
                    GPT_THROW(IoError, "writing checkpoint file ", file_, " failed: ",
                              k < 0 ? std::strerror(errno) : "nothing written", " (", n - w, " bytes at offset ",
                              r.file_offset + done + w, ")");
                w += static_cast<std::size_t>(k);
            }
            tw.stop();
            PhaseTimer twb(Phase::SaveWriteback);
            writeback.start(r.file_offset + done, n);
            done += n;
        }
    }
    {
        PhaseTimer t(Phase::SaveWriteback);
        writeback.flush();
    }
    PhaseTimer t(Phase::SaveFsync);
    // Delayed allocation can report a full disk only here.
    if (durable && ::fdatasync(fd) != 0)
        GPT_THROW(IoError, "flushing checkpoint file ", file_, " to disk failed: ", std::strerror(errno));
}

}  // namespace gpt::ckpt
