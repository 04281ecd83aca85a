// Emulated sm_90a warpgroup PTX (tests/cuda_emu/wgmma.cpp): what
// lib/backend/cuda/wgmma_sm90.cuh calls instead of its inline assembly under GPT_CUDA_EMU.
// wgmma.mma_async is warpgroup-collective (the 128 threads of four consecutive warps, the
// first a multiple of 4, all take part or the launch fails); it reads its shared-memory
// operands through matrix descriptors as the hardware does, and its result lands only at the
// issuing thread's wgmma.wait_group that covers it.
#pragma once

#include <cstdint>

namespace gpt_emu {
// The shared-memory address (the .shared window's byte offset, as __cvta_generic_to_shared
// gives it on the GPU) of `p`, which must lie in the block's dynamic shared memory: the
// emulator's window holds only that, from address 0 (1024-byte aligned). Fails the launch
// for any other pointer, or one not 16-byte aligned (a descriptor's start address drops the
// low 4 bits).
std::uint32_t wgmma_smem_address(const void* p);
void wgmma_fence();
void wgmma_commit_group();
void wgmma_wait_group(int pending);
// wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{f16|bf16}: d (n / 2 floats) = A B (+ d when
// `accumulate`, the scale-d operand). A is the 64x16 tile `desc_a` describes (M-major when
// trans_a) or, when a_regs is given, this thread's four A-fragment registers; B is the 16xn
// tile `desc_b` describes (N-major when trans_b).
void wgmma_mma(float* d, int n, bool bf16, std::uint64_t desc_a, const std::uint32_t* a_regs, std::uint64_t desc_b,
               bool trans_a, bool trans_b, bool accumulate);
}  // namespace gpt_emu
