// Emulated sm_80 warp-level PTX (tests/cuda_emu/ptx.cpp): what lib/backend/cuda/mma_sm80.cuh
// calls instead of its inline assembly under GPT_CUDA_EMU. mma and ldmatrix are
// warp-collective as on the GPU (a warp barrier; every lane of a full warp must take part,
// or the launch fails); cp.async copies land only at the issuing thread's wait.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpt_emu {
// Warp-collective (all 32 lanes of the warp take part, like the instruction): D = A*B + D for
// this lane's 4 accumulators, using the PTX m16n8k16 fragment layouts; a/b hold pairs of fp16
// (bf16 when `bf16`) values, low half = lower column/k index.
void mma_m16n8k16(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2], bool bf16);
// Warp-collective ldmatrix .m8n8 .x{count} (count 1, 2 or 4) .b16 [.trans]: `row` is this lane's row address;
// lanes 8m..8m+7 give matrix m's rows (only lanes < 8*count are used); each lane gets r[m] = row lane/4, cols
// 2*(lane%4), +1 of matrix m (low half = lower column), or with trans: elements (row 2*(lane%4), col lane/4)
// and (row 2*(lane%4)+1, col lane/4).
void ldmatrix(std::uint32_t* r, int count, bool trans, const void* row);
// Per-thread asynchronous copy of `bytes` bytes (the first src_bytes from src, the rest zeros;
// src not read when src_bytes == 0). It lands only at a cp_async_wait that covers its group.
void cp_async(void* dst, const void* src, std::size_t bytes, std::size_t src_bytes);
void cp_async_commit();            // closes this thread's current group
void cp_async_wait(int pending);   // completes (in order) all this thread's committed groups but the newest `pending`
}  // namespace gpt_emu
