// Warp-level tensor-core instructions of sm_80+ (PTX ISA "warp-level matrix multiply"):
// mma.sync m16n8k16 with fp32 accumulation, ldmatrix and cp.async. They have no CUDA C++
// spelling, so they are inline PTX here; the CPU emulator (tests/cuda_emu, GPT_CUDA_EMU)
// substitutes its own implementations of the same instructions, since inline assembly for
// the GPU cannot run on a CPU.
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point
// type"), with g = lane / 4 and t = lane % 4:
//   A 16x16 (row-major), 4 registers of two 16-bit values each:
//     a[0] = (g, 2t..2t+1)  a[1] = (g+8, 2t..2t+1)  a[2] = (g, 2t+8..)  a[3] = (g+8, 2t+8..)
//   B 16x8 (k x n, "col"), 2 registers: b[0] = (k 2t..2t+1, n g)  b[1] = (k 2t+8.., n g)
//   C/D 16x8 fp32: c[0..1] = (g, 2t..2t+1)  c[2..3] = (g+8, 2t..2t+1)
// ldmatrix .x4: lanes 8m..8m+7 give the row addresses of 8x8 matrix m (16 bytes each);
// register m of every lane receives row g, columns 2t..2t+1 of matrix m, or with .trans
// rows 2t..2t+1 of column g (the transposed matrix's row g).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(GPT_CUDA_EMU)
#include <gpt_emu/ptx.hpp>
#endif

namespace gpt::cuda {

// Two values as one 32-bit register of 16-bit elements: `lo` in the low half (the lower
// column of a fragment pair), rounded to nearest even.
template <typename T>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
    static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>);
    T l, h;
    if constexpr (std::is_same_v<T, __half>) {
        l = __float2half_rn(lo);
        h = __float2half_rn(hi);
    } else {
        l = __float2bfloat16_rn(lo);
        h = __float2bfloat16_rn(hi);
    }
    std::uint16_t lb, hb;
    memcpy(&lb, &l, 2);
    memcpy(&hb, &h, 2);
    return static_cast<std::uint32_t>(lb) | (static_cast<std::uint32_t>(hb) << 16);
}

// D = A B + D for one 16x16x16 step (see the layouts above); T is the inputs' type.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                          std::uint32_t b1) {
#if defined(GPT_CUDA_EMU)
    const std::uint32_t b[2] = {b0, b1};
    ::gpt_emu::mma_m16n8k16(d, a, b, std::is_same_v<T, __nv_bfloat16>);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (std::is_same_v<T, __half>) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
#else
    (void)d, (void)a, (void)b0, (void)b1;
    __trap();  // only compiled for sm_80+ (the build's architectures); never reached
#endif
}

// Four 8x8 matrices of 16-bit values from shared memory (transposed with kTrans); `row` is
// this lane's row address (16-byte aligned).
template <bool kTrans = false>
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* row) {
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::ldmatrix(r, 4, kTrans, row);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
    if constexpr (kTrans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(s));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(s));
#else
    (void)r, (void)row;
    __trap();
#endif
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* row) { ldmatrix_x4<true>(r, row); }

// 16 bytes from global to shared memory without passing through registers; zeros instead
// when !valid (the source is then not read). Lands at the cp_async_wait that covers it.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::cp_async(smem, gmem, 16, valid ? 16 : 0);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 16 : 0));
#else
    (void)smem, (void)gmem, (void)valid;
    __trap();
#endif
}
// 4 bytes the same way (cp.async.ca: the 4- and 8-byte sizes have no .cg form), e.g. one
// float per thread of a tile's per-row statistics, whose rows need not be 16-byte aligned.
__device__ __forceinline__ void cp_async_4(void* smem, const void* gmem, bool valid) {
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::cp_async(smem, gmem, 4, valid ? 4 : 0);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 4 : 0));
#else
    (void)smem, (void)gmem, (void)valid;
    __trap();
#endif
}
// Closes the group of this thread's cp.async copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() {
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::cp_async_commit();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// Waits until at most N of this thread's committed groups are still in flight. Other
// threads' copies need a __syncthreads after every thread's wait to be visible.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::cp_async_wait(N);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

}  // namespace gpt::cuda
