// The trainer's checkpoint saves, synchronous or --async-save (Megatron's flag), through one
// object that the trainer owns for the whole run:
//  - it holds the save folder's lock (SaveFolderLock, rank 0) from construction on, so a
//    second job given the same --save folder is refused at start-up, not at its first save;
//  - begin() waits for the previous save, then opens a CheckpointWriter; the caller writes
//    its tensors and attributes into it and calls commit();
//  - synchronous: commit() publishes before it returns;
//  - asynchronous: the caller's host copies (kept alive by begin()'s keep_alive) are written
//    by a helper thread while training goes on; poll(), called once per iteration, publishes
//    the save once every rank's part is on disk, and throws on every rank if any rank's part
//    failed, naming the previous checkpoint, which is intact; wait() (the next save, the
//    exit, a preemption signal) finishes it.
// Messages for the log go to the `log` callback (rank 0 only).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "ckpt/checkpoint_writer.hpp"

namespace gpt::ckpt {

class SaveFolderLock;

struct SaverOptions {
    bool async = false;  // --async-save
    int keep_last = 0;   // --keep-last
    std::string retention;  // why older checkpoints are removed, for the log ("": --keep-last N)
    WriterOptions writer;
};

struct SaveResult {
    std::int64_t iteration = 0;
    CommitResult commit;
    double stall_seconds = 0;  // begin() .. commit() returned, plus the publish in poll()/wait()
    double total_seconds = 0;  // begin() to published
    std::uint64_t host_copy_bytes_max = 0, host_copy_bytes_total = 0;  // commit()'s keep_alive_bytes
};

class CheckpointSaver {
public:
    using LogFn = std::function<void(const std::string&)>;
    // Collective. Rank 0 locks `dir` (creating it); throws IoError on every rank, naming the
    // holder, when another job holds it.
    CheckpointSaver(MPI_Comm comm, std::string dir, SaverOptions options, LogFn log = {});
    // A save still in flight (an error ends the job): its helper thread is stopped and
    // joined, nothing is published, the tracker still names the previous checkpoint.
    ~CheckpointSaver();
    CheckpointSaver(const CheckpointSaver&) = delete;
    CheckpointSaver& operator=(const CheckpointSaver&) = delete;

    // Collective. Finishes the save in flight (wait()), then opens the writer for
    // `iteration`. The training stall of an asynchronous save is measured from here.
    CheckpointWriter& begin(std::int64_t iteration);
    // Collective. keep_alive owns the buffers passed to write(): with --async-save they are
    // written after this returns, and released once the save is published or abandoned.
    // Synchronous: publishes and returns the result. Asynchronous: starts the background
    // writes and returns nullopt. keep_alive_bytes: the memory keep_alive holds on this rank
    // (the host copy), which an asynchronous save keeps until published: logged (largest
    // rank, all ranks) so the user sees what --async-save costs. ready (asynchronous only):
    // called on the background writer's thread before it reads keep_alive's buffers, to wait
    // for the device-to-host copies that fill them (CheckpointWriter::commit_in_background).
    std::optional<SaveResult> commit(std::shared_ptr<const void> keep_alive, std::uint64_t keep_alive_bytes = 0,
                                     std::function<void()> ready = {});
    // Collective; once per iteration. Publishes a background save that every rank has
    // finished writing (one small allreduce while one is in flight, nothing otherwise).
    std::optional<SaveResult> poll();
    // Collective. Waits for the save in flight and publishes it.
    std::optional<SaveResult> wait();

    bool in_flight() const { return writer_ != nullptr; }
    // The newest checkpoint this folder's tracker names (as far as this saver knows); -1: none.
    std::int64_t latest_published() const { return latest_; }

private:
    SaveResult publish();  // collective: finish_commit + bookkeeping; throws with context

    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0;
    std::string dir_;
    SaverOptions opts_;
    LogFn log_;
    std::unique_ptr<SaveFolderLock> lock_;
    std::unique_ptr<CheckpointWriter> writer_;
    std::shared_ptr<const void> keep_alive_;
    std::chrono::steady_clock::time_point started_;
    double stall_ = 0;
    std::uint64_t copy_max_ = 0, copy_total_ = 0;
    std::int64_t latest_ = -1;
};

}  // namespace gpt::ckpt
