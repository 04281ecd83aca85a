// Between the emulator's scheduler (simt.cpp), its runtime (runtime.cpp) and its PTX (ptx.cpp).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "cuda_runtime.h"

namespace gpt_emu {

// sm_80's opt-in limit (A100; H100 allows 227 KiB): the smaller of the two targets we build.
constexpr std::size_t kMaxOptinSmem = 166912;
constexpr std::size_t kDefaultSmem = 48 * 1024;

// The dynamic shared memory a kernel may launch with (cudaFuncSetAttribute raises it).
std::size_t max_dynamic_smem(const void* kernel);

// Work issued to `stream` runs after the work it waits for: completes what is pending on it
// (and, for the legacy default stream, on every blocking stream). False with the sticky
// error set for an unknown stream. Used where the host must wait (a copy into pageable
// host memory, an NCCL operation that reads its buffers when issued).
bool stream_before_work(cudaStream_t stream);

// Defers `work` (a kernel, a copy, a memset, a matmul) to run in stream order when something
// forces it (see runtime.cpp). False with the sticky error set for an unknown stream. An
// error `work` reports through set_error is sticky until a synchronisation returns it.
bool stream_enqueue(cudaStream_t stream, std::function<void()> work);

// Whether cudaDeviceSynchronize drains the streams in a pseudo-random interleaving (under
// GPT_EMU_SCHEDULE=warps) instead of newest work first.
bool random_drain();

// After a kernel: which allocation's red zone (the bytes after its end) was written, as a
// sentence, or empty. Repairs the zone, so each overflow is reported once. Call with device
// memory open.
std::string red_zone_violation();

// One thread's cp.async copies not yet landed, in issue order; `group` counts the commits
// before the copy, so the committed groups are a prefix of `copies`. Kept by the scheduler
// with each fiber (it is per-thread state on the GPU), used by ptx.cpp.
struct AsyncCopy {
    void* dst;
    const void* src;
    std::size_t bytes, src_bytes;
    unsigned group;
};
struct AsyncCopies {
    std::vector<AsyncCopy> copies;
    unsigned committed = 0;
};
AsyncCopies& current_async_copies();  // the running kernel thread's
// Whether cp.async copies land when issued (the earliest the GPU may) rather than at the
// wait (the latest): so under GPT_EMU_SCHEDULE=warps, where one warp runs ahead, a copy into
// a buffer other warps still read, with no barrier between, shows; the other schedules catch
// a read before the wait.
bool async_copies_land_at_issue();

}  // namespace gpt_emu
