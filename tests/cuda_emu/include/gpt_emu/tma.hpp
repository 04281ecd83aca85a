// Emulated sm_90 mbarrier and TMA tile loads (tests/cuda_emu/tma.cpp): what
// lib/backend/cuda/tma_sm90.cuh calls instead of its inline assembly under GPT_CUDA_EMU.
// The mbarrier lives in its 8 bytes of shared memory, as on the GPU (pending arrivals,
// expected arrivals, transaction bytes, phase); a TMA load lands (and completes its bytes on
// the barrier) at issue, the earliest the hardware may, under GPT_EMU_SCHEDULE=forward and
// warps, or at a wait on that barrier, the latest, under reverse.
#pragma once

#include <cstdint>

#include "cuda_runtime.h"

namespace gpt_emu {

// The emulator's CUtensorMap: a 2D tiled map of 16-bit elements (what our wrapper encodes).
struct alignas(64) TensorMap {
    std::uint64_t magic;
    const void* global;
    unsigned long long rows, cols, row_bytes;
    unsigned box_rows, box_cols, elem_bytes;
    int swizzle_bytes;
    unsigned char pad[128 - 56];
};
static_assert(sizeof(TensorMap) == 128);

// Host: checks and records what cuTensorMapEncodeTiled would (a device pointer 16-byte
// aligned, a row pitch that is a multiple of 16, boxes of 1..256 elements, an inner box of
// a multiple of 16 bytes that, swizzled, equals the swizzle span).
cudaError_t encode_tensor_map_2d(TensorMap* map, const void* global, unsigned long long rows, unsigned long long cols,
                                 unsigned long long row_bytes, unsigned box_rows, unsigned box_cols, int swizzle_bytes);
void mbarrier_init(void* bar, unsigned count);
// One arrival, after adding tx_bytes to the transaction count (arrive.expect_tx when > 0).
void mbarrier_arrive(void* bar, unsigned tx_bytes);
// Lands the TMA copies on this barrier, then: whether the phase of parity `parity` is over.
bool mbarrier_try_wait(void* bar, unsigned parity);
// cp.async.bulk.tensor.2d...mbarrier::complete_tx::bytes: the box at (col, row) into dst.
void tma_load_2d(void* dst, const TensorMap* map, void* bar, int col, int row);
// cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32: adds `bytes` bytes of floats
// at src (shared memory) into dst (device memory), both 16-byte aligned, bytes a multiple of
// 16; done (src read, dst added) at the bulk_wait_group that covers it, the latest the GPU
// may read src (at issue under GPT_EMU_SCHEDULE=warps, the earliest).
void bulk_reduce_add_f32(float* dst, const float* src, unsigned bytes);
void bulk_commit_group();            // cp.async.bulk.commit_group
void bulk_wait_group(int pending);   // cp.async.bulk.wait_group[.read] pending
// Ends the thread's turn while it waits for an mbarrier (simt.cpp).
void spin_point();
}  // namespace gpt_emu
