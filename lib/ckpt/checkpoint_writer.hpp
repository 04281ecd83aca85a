// Writes one checkpoint collectively with parallel HDF5 (MPI-IO): every rank writes its own
// slices of the global tensors as hyperslabs of one file, then commit() publishes it
// atomically (close, fsync, rename the folder, replace the tracker, apply retention).
// See docs/checkpoint-format.md for the layout.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/attribute.hpp"
#include "ckpt/tensor_slice.hpp"

namespace gpt::ckpt {

struct WriterOptions {
    // Suffix of the temporary folder; empty: SLURM_JOB_ID (if set) plus a random number.
    std::string tag;
    IoMode io_mode = IoMode::Auto;
    // Datasets of at least alignment_threshold bytes start at multiples of alignment
    // (match the parallel file system's stripe size).
    std::uint64_t alignment = 1u << 20;
    std::uint64_t alignment_threshold = 1u << 20;
    MPI_Info info = MPI_INFO_NULL;  // MPI-IO hints (striping, cb_nodes, ...)
    // --async-save: write() only creates the datasets and records this rank's pieces;
    // commit_in_background() writes them on a helper thread (no MPI, no HDF5 there), and
    // finish_commit() publishes. The buffers given to write() must then stay valid and
    // unchanged until finish_commit() returns (or the writer is destroyed). No collective
    // data I/O in this mode: every piece is written independently, and io_mode Collective
    // is refused (UsageError from the constructor).
    bool background = false;
};

// Where this rank's bytes went so far (for tests and bench/checkpoint): written with
// O_DIRECT, through the page cache, and received from other ranks by the strided exchange
// (StridedExchange) to be written here. Background writes count once finish_commit() ran.
struct WriteStats {
    std::uint64_t direct_bytes = 0, buffered_bytes = 0, exchanged_bytes = 0;
};

struct CommitResult {
    std::string path;                  // DIR/iter_NNNNNNN
    std::vector<std::int64_t> removed; // iterations deleted by keep_last
};

class CheckpointWriter {
public:
    // Collective over comm. Creates DIR/iter_NNNNNNN.tmp-<tag>/model_optim.h5.
    CheckpointWriter(MPI_Comm comm, const std::string& save_dir, std::int64_t iteration,
                     const WriterOptions& options = {});
    // Without commit(): closes the file (collective) and leaves the temporary folder for
    // the next successful save to remove; the tracker never saw it. While an exception
    // unwinds, the collective close is skipped, as in ~CheckpointReader.
    ~CheckpointWriter();
    CheckpointWriter(const CheckpointWriter&) = delete;
    CheckpointWriter& operator=(const CheckpointWriter&) = delete;

    // Root attributes of the file. Rank 0's values are stored; other ranks may skip this.
    void set_attribute(const std::string& name, AttributeValue value);

    // Collective. Every rank passes the same tensors (name, shape, dtype) in the same
    // order; each with its own selection (none for tensors it does not write). The
    // selections of one tensor must cover it exactly once across ranks: replicas (data-
    // parallel copies) select none. May be called several times; names must be new.
    void write(const std::vector<TensorSlice>& slices);

    // Collective. Each rank stores its own bytes (RNG states, loader state) under `name`;
    // every rank must call it with the same name, and at least one rank with data.
    void write_rank_blob(const std::string& name, const void* data, std::size_t bytes);

    // Collective. Finishes the file and publishes it; keep_last > 0 then removes older
    // checkpoints beyond the newest keep_last. The same as commit_in_background() followed
    // by finish_commit().
    CommitResult commit(int keep_last = 0);

    // Not collective. With options.background, starts writing this rank's pieces on a
    // helper thread (checksums, write-back, fdatasync) and returns at once; otherwise the
    // data is written already and this only records keep_last. `ready` (optional) is called
    // on the helper thread before it reads any buffer given to write(): it waits until they
    // hold their bytes (device-to-host copies still landing); what it throws fails the save.
    void commit_in_background(int keep_last = 0, std::function<void()> ready = {});
    // Collective and cheap (one small allreduce): true when every rank's background part
    // has ended, successfully or not, so that finish_commit() will not wait.
    bool background_finished();
    // Collective. Waits for this rank's background part; if any rank's failed, throws that
    // error (the lowest failing rank's) on every rank and publishes nothing. Otherwise
    // writes the manifest (checksums summed over the ranks) and attributes, closes, fsyncs
    // and publishes as commit() does: the tracker changes only once every rank's part is
    // on disk.
    CommitResult finish_commit();

    std::int64_t iteration() const;

    const std::string& temp_file() const;
    // Where this rank's bytes went so far (WriteStats).
    WriteStats stats() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace gpt::ckpt
