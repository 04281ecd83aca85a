// Where a save or a load spends its time, per phase, for bench/checkpoint's breakdown.
// Process-wide counters of seconds (atomic: the checksum worker and a background save's
// thread add to them too). Timing a phase costs two clock reads per 4 MiB piece or per
// metadata step, far below the I/O it times, so it is always on; nothing reads the
// counters but the benchmark (phase_times().snapshot()).
// Phases on helper threads overlap the ones on the main thread: a row's seconds are the
// time that phase's work took wherever it ran, so the rows of one operation can add up to
// more than its wall time.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace gpt::ckpt {

enum class Phase {
    // save
    SaveCreate,     // file and dataset creation (HDF5 metadata, collective)
    SaveChecksum,   // checksums of the pieces (helper thread)
    SaveChecksumWait, // main thread waiting for the checksum worker to catch up
    SaveWrite,      // pwrite of the pieces (page cache)
    SaveWriteback,  // sync_file_range write-back starts
    SaveFsync,      // fdatasync of a rank's part + fsync of the file and folder
    SaveMetadata,   // manifest, attributes, H5Fclose (HDF5 metadata, collective)
    SavePublish,    // rename, tracker, retention
    SaveCollective, // collective-I/O tensors through HDF5 (checksum included)
    SaveExchange,   // strided tensors' two-phase exchange into domains (StridedExchange)
    // load
    LoadOpen,       // H5Fopen, manifest, structure and attribute checks (collective)
    LoadRead,       // pread of the pieces (or H5Dread where the pread path does not apply)
    LoadVerify,     // checksums of what was read (helper thread)
    LoadVerifyWait, // main thread waiting for the checksum worker to catch up
    LoadScatter,    // copies out of staging buffers and type conversion
    LoadAgree,      // checksum reductions and error agreement between ranks
    LoadExchange,   // strided tensors handed out of the domains read (StridedGather)
    LoadClose,      // H5Fclose of the reader (collective)
    kCount
};

const char* phase_name(Phase p);

class PhaseTimes {
public:
    void add(Phase p, double seconds) {
        ns_[static_cast<int>(p)].fetch_add(static_cast<std::int64_t>(seconds * 1e9), std::memory_order_relaxed);
    }
    double seconds(Phase p) const {
        return 1e-9 * static_cast<double>(ns_[static_cast<int>(p)].load(std::memory_order_relaxed));
    }
    void reset() {
        for (auto& n : ns_) n.store(0, std::memory_order_relaxed);
    }

private:
    std::array<std::atomic<std::int64_t>, static_cast<int>(Phase::kCount)> ns_{};
};

PhaseTimes& phase_times();

// Adds the scope's duration to a phase.
class PhaseTimer {
public:
    explicit PhaseTimer(Phase p) : phase_(p), start_(std::chrono::steady_clock::now()) {}
    ~PhaseTimer() { stop(); }
    PhaseTimer(const PhaseTimer&) = delete;
    PhaseTimer& operator=(const PhaseTimer&) = delete;
    void stop() {
        if (done_) return;
        done_ = true;
        phase_times().add(phase_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    }

private:
    Phase phase_;
    std::chrono::steady_clock::time_point start_;
    bool done_ = false;
};

}  // namespace gpt::ckpt
