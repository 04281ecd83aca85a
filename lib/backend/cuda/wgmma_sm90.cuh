// Hopper (sm_90a) warpgroup tensor-core instructions (PTX ISA "Asynchronous Warpgroup Level
// Matrix Multiply-Accumulate"): wgmma.fence, wgmma.commit_group, wgmma.wait_group and
// wgmma.mma_async m64nNk16 with fp32 accumulators and fp16/bf16 inputs, A and B from shared
// memory through matrix descriptors or A from registers. They have no CUDA C++ spelling, so
// they are inline PTX here, compiled only where nvcc targets sm_90a
// (__CUDA_ARCH_FEAT_SM90_ALL: the "a" architectures alone have wgmma); for every other
// device architecture (sm_80 in our builds) each wrapper compiles to __trap(), so a kernel
// that uses them must be launched only on sm_90 (the caller checks the device, e.g.
// cudaDeviceProp::major == 9). The CPU emulator (tests/cuda_emu, GPT_CUDA_EMU) substitutes
// its own implementation (gpt_emu/wgmma.hpp), which reads the descriptors as the hardware
// does (docs/cuda-emulator.md, "The sm_90 instructions").
//
// Use (all 128 threads of a warpgroup: four consecutive warps, the first a multiple of 4):
//   fence();                    // before the first mma_async, and after touching the registers
//   mma_ss<N, T>(acc, da, db, accumulate);  ... (several k steps on the same acc)
//   commit_group();
//   wait_group<0>();            // acc is undefined until here (NaN on the emulator)
//   fence_operand(acc);         // keep the compiler from moving acc's reads above the wait
// Shared memory that threads wrote with ordinary stores needs fence_proxy_async_shared() by
// the writers (then a barrier) before wgmma reads it: wgmma reads through the async proxy.
//
// Accumulator fragment (PTX ISA, "Register Fragments", wgmma D for .m64nNk16 .f32): warp w of
// the warpgroup owns rows 16w..16w+15; with g = lane / 4 and q = lane % 4, register i (of N/2)
// holds row 16w + g + 8 * ((i / 2) % 2), column 8 * (i / 4) + 2q + (i % 2).
// A from registers: four 32-bit registers of two 16-bit values, the layout of mma.m16n8k16's
// A (mma_sm80.cuh) on the warp's 16 rows: a[0] = (g, 2q..2q+1), a[1] = (g+8, 2q..),
// a[2] = (g, 2q+8..), a[3] = (g+8, 2q+8..), low half = lower k.
//
// Shared-memory tiles (PTX ISA, "Shared Memory Matrix Layout", "Canonical Layouts"), for
// 16-bit types (T = 8 elements = 16 bytes); A is 64x16 (M x K), B is 16xN (K x N):
//   K-major (the default; kTrans false): rows of the tile run along M (A) or N (B), K is
//     contiguous. No swizzle: 8x8 core matrices of 128 contiguous bytes (8 rows of 16 bytes);
//     LBO = bytes between core matrices adjacent in K, SBO = between 8-row groups.
//     Swizzled (S = 128, 64 or 32 bytes): each row is S bytes of K (S/2 elements, of which
//     the instruction reads 32 bytes starting at the descriptor's address), 8 rows form one
//     S x 8 atom; SBO = bytes between 8-row groups (8 S when packed); LBO unused.
//   MN-major (kTrans true): M (A) or N (B) is contiguous, rows run along K. No swizzle:
//     core matrices of 8 contiguous M/N elements x 8 K rows (128 bytes); SBO = bytes between
//     core matrices adjacent in M/N, LBO = between those adjacent in K. Swizzled: each K row
//     is S bytes of M/N; LBO = bytes between S/2-element blocks of M/N, SBO = between groups
//     of 8 K rows (8 S when packed).
//   Swizzle S: the 16-byte chunk index (address bits 4..) is XORed with address bits 7..
//     (3 bits for 128B, 2 for 64B, 1 for 32B): tiles must start on a 1024-, 512- or 256-byte
//     boundary (the descriptor's base offset stays 0), and moving along K inside a swizzled
//     K-major row is done by adding the byte offset to the start address (desc_add).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/mma_sm80.cuh"  // pack2

#if defined(GPT_CUDA_EMU)
#include <gpt_emu/wgmma.hpp>
#endif

// 1 where the inline PTX is compiled: device code for an sm_90a target, not the emulator.
#if !defined(GPT_CUDA_EMU) && defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GPT_WGMMA_PTX 1
#else
#define GPT_WGMMA_PTX 0
#endif

namespace gpt::cuda::wgmma {

// The descriptor's swizzle mode field (bits 62-63).
enum class Swizzle : std::uint32_t { None = 0, B128 = 1, B64 = 2, B32 = 3 };

// A shared-memory matrix descriptor from a .shared byte address and the leading and stride
// dimension byte offsets (see above). Each is encoded as (x & 0x3FFFF) >> 4 in 14 bits, so
// all three must be multiples of 16 below 256 KiB; the base offset (bits 49-51) is 0.
__host__ __device__ constexpr std::uint64_t make_desc(std::uint32_t smem_addr, std::uint32_t lbo_bytes,
                                                      std::uint32_t sbo_bytes, Swizzle swizzle) {
    return static_cast<std::uint64_t>((smem_addr & 0x3FFFFu) >> 4) |
           static_cast<std::uint64_t>((lbo_bytes & 0x3FFFFu) >> 4) << 16 |
           static_cast<std::uint64_t>((sbo_bytes & 0x3FFFFu) >> 4) << 32 |
           static_cast<std::uint64_t>(swizzle) << 62;
}
// The same descriptor for a tile `bytes` further on (a multiple of 16; the start address
// must stay below 256 KiB): the next k step of a K-major tile, the next stage of a buffer.
__host__ __device__ constexpr std::uint64_t desc_add(std::uint64_t desc, std::uint32_t bytes) {
    return desc + (bytes >> 4);
}

// The .shared address of a pointer into shared memory (on the emulator: into the block's
// dynamic shared memory, which there starts at address 0 and 1024-byte aligned; it fails the
// launch for anything else or an address not 16-byte aligned).
__device__ __forceinline__ std::uint32_t smem_address(const void* p) {
#if defined(GPT_CUDA_EMU)
    return ::gpt_emu::wgmma_smem_address(p);
#else
    return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
#endif
}
__device__ __forceinline__ std::uint64_t make_desc(const void* smem, std::uint32_t lbo_bytes, std::uint32_t sbo_bytes,
                                                   Swizzle swizzle) {
    return make_desc(smem_address(smem), lbo_bytes, sbo_bytes, swizzle);
}

// wgmma.fence: orders the warpgroup's earlier register accesses (accumulators, A fragments)
// before the following mma_async. Needed before the first mma_async and after any access.
__device__ __forceinline__ void fence() {
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::wgmma_fence();
#elif GPT_WGMMA_PTX
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
    __trap();  // sm_90a only (see the top of this file)
#endif
}
// Closes the group of this warpgroup's mma_async issued since the last commit.
__device__ __forceinline__ void commit_group() {
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::wgmma_commit_group();
#elif GPT_WGMMA_PTX
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
    __trap();
#endif
}
// Waits until at most N of this warpgroup's committed groups are pending; their
// accumulators are then written (follow with fence_operand on them).
template <int N>
__device__ __forceinline__ void wait_group() {
    static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes 0..7");
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::wgmma_wait_group(N);
#elif GPT_WGMMA_PTX
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#else
    __trap();
#endif
}
// Makes generic-proxy writes to shared memory (ordinary stores) visible to the async proxy
// that wgmma reads through; each writer issues it before the barrier that precedes the
// mma_async. (The emulator has one proxy: nothing to do there, and its absence is not caught.)
__device__ __forceinline__ void fence_proxy_async_shared() {
#if defined(GPT_CUDA_EMU)
#elif GPT_WGMMA_PTX
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#else
    __trap();
#endif
}
// A compiler-level fence on registers an mma_async writes asynchronously: without it nvcc
// may move their reads (or writes) across the wait_group (or fence) it does not see them in.
template <int K>
__device__ __forceinline__ void fence_operand(float (&r)[K]) {
#if GPT_WGMMA_PTX
#pragma unroll
    for (int i = 0; i < K; ++i) asm volatile("" : "+f"(r[i])::"memory");
#else
    (void)r;
#endif
}
template <int K>
__device__ __forceinline__ void fence_operand(std::uint32_t (&r)[K]) {
#if GPT_WGMMA_PTX
#pragma unroll
    for (int i = 0; i < K; ++i) asm volatile("" : "+r"(r[i])::"memory");
#else
    (void)r;
#endif
}

template <int N, typename T>
struct Shape {
    static_assert(N == 64 || N == 128, "wgmma wrappers exist for N = 64 and 128");
    static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>, "fp16 or bf16 inputs");
    static constexpr bool ok = true;
};

// D (64xN, fp32, the fragment above) = A B (+ D when `accumulate`, PTX's scale-d): A is the
// 64x16 tile desc_a describes (M-major when kTransA), B the 16xN tile desc_b describes
// (N-major when kTransB). Asynchronous: d is undefined until the wait_group covering it.
template <int N, typename T, bool kTransA = false, bool kTransB = false>
__device__ __forceinline__ void mma_ss(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b, bool accumulate) {
    static_assert(Shape<N, T>::ok);
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::wgmma_mma(d, N, std::is_same_v<T, __nv_bfloat16>, desc_a, nullptr, desc_b, kTransA, kTransB, accumulate);
#elif GPT_WGMMA_PTX
    const std::uint32_t scale_d = accumulate ? 1u : 0u;
    if constexpr (N == 64 && std::is_same_v<T, __half>) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
            "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
            "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
            "}, %32, %33, p, 1, 1, %35, %36;\n}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
              "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
              "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
              "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
            : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransA ? 1 : 0), "n"(kTransB ? 1 : 0));
    }
    if constexpr (N == 64 && std::is_same_v<T, __nv_bfloat16>) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
            "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
            "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
            "}, %32, %33, p, 1, 1, %35, %36;\n}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
              "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
              "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
              "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
            : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransA ? 1 : 0), "n"(kTransB ? 1 : 0));
    }
    if constexpr (N == 128 && std::is_same_v<T, __half>) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
            "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
            "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
            "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
            "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
            "}, %64, %65, p, 1, 1, %67, %68;\n}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
              "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
              "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
              "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
              "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
              "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
              "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
              "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
            : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransA ? 1 : 0), "n"(kTransB ? 1 : 0));
    }
    if constexpr (N == 128 && std::is_same_v<T, __nv_bfloat16>) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
            "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
            "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
            "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
            "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
            "}, %64, %65, p, 1, 1, %67, %68;\n}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
              "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
              "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
              "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
              "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
              "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
              "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
              "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
            : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransA ? 1 : 0), "n"(kTransB ? 1 : 0));
    }
#else
    (void)d, (void)desc_a, (void)desc_b, (void)accumulate;
    __trap();
#endif
}

// The same with A (64x16) from this thread's four registers (layout above), as attention's
// P V takes P straight from the softmax: a must not change until the wait_group.
template <int N, typename T, bool kTransB = false>
__device__ __forceinline__ void mma_rs(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t desc_b,
                                       bool accumulate) {
    static_assert(Shape<N, T>::ok);
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::wgmma_mma(d, N, std::is_same_v<T, __nv_bfloat16>, 0, a, desc_b, false, kTransB, accumulate);
#elif GPT_WGMMA_PTX
    const std::uint32_t scale_d = accumulate ? 1u : 0u;
    if constexpr (N == 64 && std::is_same_v<T, __half>) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {"
            "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
            "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
            "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
              "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
              "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
              "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(kTransB ? 1 : 0));
    }
    if constexpr (N == 64 && std::is_same_v<T, __nv_bfloat16>) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
            "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
            "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
            "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
              "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
              "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
              "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(kTransB ? 1 : 0));
    }
    if constexpr (N == 128 && std::is_same_v<T, __half>) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
            "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
            "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
            "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
            "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
            "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
              "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
              "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
              "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
              "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
              "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
              "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
              "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(kTransB ? 1 : 0));
    }
    if constexpr (N == 128 && std::is_same_v<T, __nv_bfloat16>) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
            "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
            "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
            "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
            "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
            "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
              "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
              "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
              "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
              "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
              "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
              "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
              "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(kTransB ? 1 : 0));
    }
#else
    (void)d, (void)a, (void)desc_b, (void)accumulate;
    __trap();
#endif
}

// The accumulators of a 64 x N product (the fragment above), rounded to T, as the A
// registers of k step `step` (columns 16 step .. 16 step + 15) of a following mma_rs: the
// D fragment of two 8-column chunks is the A fragment of one 16-deep step, so attention's P
// goes from S = Q K^T to P V without leaving registers.
template <typename T, int K>
__device__ __forceinline__ void accumulators_to_a(const float (&d)[K], int step, std::uint32_t (&a)[4]) {
    const float* c = d + 8 * step;
    a[0] = pack2<T>(c[0], c[1]);  // row g,     k 2q, 2q+1
    a[1] = pack2<T>(c[2], c[3]);  // row g + 8
    a[2] = pack2<T>(c[4], c[5]);  // row g,     k 2q + 8, 2q + 9
    a[3] = pack2<T>(c[6], c[7]);  // row g + 8
}

}  // namespace gpt::cuda::wgmma
