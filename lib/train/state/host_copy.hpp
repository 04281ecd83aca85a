// The host copy of a rank's training state that a checkpoint save writes from: each model
// chunk's parameters and its optimizer's fp32 main parameters and Adam moments, in the
// backend's host memory (Backend::alloc_host: pinned on a GPU, so the device-to-host copies
// run at the link's speed and asynchronously; page-aligned, so the checkpoint's O_DIRECT
// writes go from it in place wherever a tensor's file offset and its place here agree
// within a page). One per run, kept: every save copies into the same, already touched pages
// (fresh pages cost a host fault each on our VMs: 2-3 s per GB).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "train/state/checkpoint_slices.hpp"

namespace gpt::train {

class HostCopy {
public:
    explicit HostCopy(Backend& be) : be_(be) {}
    ~HostCopy();
    HostCopy(const HostCopy&) = delete;
    HostCopy& operator=(const HostCopy&) = delete;

    // Queues the copies of `state` (the same chunks in the backend's memory, never
    // dereferenced here) into this copy with Backend::copy_to_host_async, allocating only
    // when a size changed; returns the event after them. The caller waits on it before
    // reading chunks() (the background writer, or at once for a synchronous save or a load).
    // The previous fill must not be read any more (a save in flight was waited for).
    std::shared_ptr<Backend::HostCopyEvent> fill(const std::vector<ChunkHost>& state);

    std::vector<ChunkHost>& chunks() { return host_; }
    const std::vector<ChunkHost>& chunks() const { return host_; }
    // The host memory the copy holds (what the log reports as the host copy).
    std::uint64_t bytes() const;

private:
    struct Block {
        void* p = nullptr;
        std::size_t bytes = 0;
    };
    // A kHostAlign-aligned block of `bytes` (reused when the size is the same).
    void* block(std::size_t index, std::size_t bytes);

    Backend& be_;
    std::vector<Block> blocks_;  // four per chunk: params, main, exp_avg, exp_avg_sq
    std::vector<ChunkHost> host_;
};

}  // namespace gpt::train
