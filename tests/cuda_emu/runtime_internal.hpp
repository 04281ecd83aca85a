// Between the emulator's scheduler (simt.cpp), its runtime (runtime.cpp) and its PTX (ptx.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cuda_runtime.h"

namespace gpt_emu {

// sm_80's opt-in limit (A100; H100 allows 227 KiB): the smaller of the two targets we build.
constexpr std::size_t kMaxOptinSmem = 166912;
constexpr std::size_t kMaxOptinSmemSm90 = 232448;  // H100 / H200: 227 KiB
// The emulated device's opt-in limit: sm_80's, or sm_90's under emulate_sm90(true).
std::size_t max_optin_smem();
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
// One thread's bulk reductions (cp.reduce.async.bulk ... .add.f32, tma.cpp) not yet done, in
// issue order; `group` counts the thread's cp.async.bulk.commit_groups before each, so the
// committed groups are a prefix. Each reads its shared-memory source and adds it into global
// memory at the wait_group that covers it (at issue under the warps schedule).
struct BulkReduce {
    float* dst;
    const float* src;
    std::size_t n;  // floats
    unsigned group;
    bool done;      // done at issue (warps schedule), kept until a wait covers it
};
struct BulkReduces {
    std::vector<BulkReduce> ops;
    unsigned committed = 0;
};
BulkReduces& current_bulk_reduces();  // the running kernel thread's
// Whether cp.async copies land when issued (the earliest the GPU may) rather than at the
// wait (the latest): so under GPT_EMU_SCHEDULE=warps, where one warp runs ahead, a copy into
// a buffer other warps still read, with no barrier between, shows; the other schedules catch
// a read before the wait.
bool async_copies_land_at_issue();

// One thread's wgmma.mma_async operations not yet complete (wgmma.cpp), in issue order;
// `group` counts the thread's commit_groups before the operation, so the committed groups
// are a prefix. The accumulator registers of a pending operation read as NaN (the hardware
// writes them asynchronously); its result lands at the wait_group that covers its group.
struct WgmmaOp {
    float* d;                      // the thread's accumulator registers (n / 2 floats)
    std::vector<float> d_in;       // their value at issue (empty when chained or scale-d = 0)
    bool chained = false;          // accumulates onto an earlier pending operation's result
    int n = 0;
    bool bf16 = false, trans_a = false, trans_b = false, accumulate = false, a_in_regs = false;
    unsigned long long desc_a = 0, desc_b = 0;
    unsigned a_warp[32][4] = {};   // with a_in_regs: the A fragments of the thread's warp
    const unsigned* a_ptr = nullptr;  // this thread's A registers, which must not change
    unsigned a_mine[4] = {};
    std::vector<float> operands;   // the operand values this thread reads, taken at the issue
    unsigned group = 0;
    std::uint64_t seq = 0;         // its place in the warpgroup's issue order (WgmmaIssues)
};
struct WgmmaState {
    std::vector<WgmmaOp> ops;
    unsigned committed = 0;
    std::uint64_t issued = 0;      // mma_async issued so far (the next one's seq)
    // wgmma.fence is due before the first mma_async and again after every wait_group (the
    // thread reads or writes its registers then): cleared by wgmma.fence.
    bool fence_due = true;
};
WgmmaState& current_wgmma();  // the running kernel thread's
// Bytes of dynamic shared memory the running kernel was launched with (at g_dynamic_smem).
std::size_t dynamic_smem_bytes();
// Warpgroup gather: each of the 128 threads of the caller's warpgroup (threads 128g ..
// 128g + 127 of the block, four whole warps) offers `bytes` bytes (kWarpgroupGatherMax at
// most) and receives all 128 offers, thread after thread, in `all`, after one warpgroup
// barrier. Returns, in `mask`, which threads offered at this barrier (bit t % 64 of word
// t / 64): threads that exited, lie past the block's end or wait at another barrier are
// absent and their bytes stale.
constexpr std::size_t kWarpgroupGatherMax = 48;
void warpgroup_gather(const void* mine, std::size_t bytes, void* all, unsigned long long (&mask)[2]);
int warpgroup_thread();  // the running thread's index within its warpgroup (0..127)
// A warpgroup's wgmma.mma_async issues not yet made by all of its 128 threads: the k-th
// issue of every thread is the warpgroup's k-th operation. The first thread to issue one
// records its descriptors and flags (every other must give the same), and the operation
// can complete only when all 128 have issued it (each warp issues on its own: the
// instruction is .sync.aligned over the warp, not a barrier over the warpgroup). Kept per
// block, one per warpgroup; reset when the block starts.
struct WgmmaIssue {
    std::uint64_t desc_a, desc_b;
    std::uint32_t flags;
    int first;    // the warpgroup thread that issued it first
    int threads;  // how many have issued it
};
struct WgmmaIssues {
    std::uint64_t base = 0;  // seq of pending.front(); every earlier one is complete
    std::vector<WgmmaIssue> pending;
    bool issued_by_all(std::uint64_t seq) const {
        return seq < base || pending[static_cast<std::size_t>(seq - base)].threads == 128;
    }
};
WgmmaIssues& current_wgmma_issues();  // the running thread's warpgroup's
// Whether the running thread's warpgroup has all 128 threads within the block.
bool warpgroup_complete();
// Blocks the running thread (a wgmma.wait_group) until every thread of its warpgroup has
// issued operation `seq`; a warp that never does is a deadlock naming the wait.
void wgmma_wait_issued(std::uint64_t seq);
// The arena's bytes [begin, end), for in_arena tests repeated in a loop (ldmatrix) without a
// call each.
struct ArenaRange {
    const char *begin, *end;
    bool contains(const void* p) const {
        const auto* c = static_cast<const char*>(p);
        return c >= begin && c < end;
    }
};
ArenaRange arena_range();
// The float value of every fp16 bit pattern, as __half2float gives it (ptx.cpp).
const float* half_table();
// As warp_gather (gpt_emu/simt.hpp) without the copy: *all points at lane 0's offer, lane
// l's at *all + l * kWarpGatherMax. Valid until the calling lane's next warp barrier (the
// set is rewritten two warp barriers later, which no lane passes before the caller's next).
std::uint32_t warp_gather_view(const void* mine, std::size_t bytes, const unsigned char** all);

// A TMA tile load in flight (tma.cpp): lands, and completes its bytes on the mbarrier, at a
// wait on that barrier (at issue under tma_loads_land_at_issue). Kept per block.
struct BulkCopy {
    void* bar;                 // the mbarrier it completes
    unsigned char* dst;        // shared memory (the box's first byte)
    std::uint32_t dst_addr;    // its .shared address (the swizzle uses address bits)
    const unsigned char* global;
    unsigned long long rows, cols, row_bytes;
    unsigned box_rows, box_cols, elem_bytes;
    int swizzle_bytes;
    long long row0, col0;      // the box's first element (may lie outside the tensor: zeros)
    bool landed;               // landed at issue (warps schedule), kept until a wait on `bar`
};
std::vector<BulkCopy>& current_bulk_copies();  // the running block's
// Whether TMA loads land when issued (the earliest; under the forward and warps schedules)
// rather than at the first wait on their mbarrier (the latest; reverse). At issue, a load
// into a stage a thread's wgmma may still read (released too early) lands between that
// product's issue and its wait under forward, whose producer (warpgroup 0) runs first in a
// round; at the wait, reverse (consumers first) shows a tile read before its barrier.
bool tma_loads_land_at_issue();
// Ends the running thread's turn at an mbarrier it found incomplete: it runs again in the
// next round. A round in which only such threads ran is a deadlock (the launch fails).
void spin_point();

}  // namespace gpt_emu
