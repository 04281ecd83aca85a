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

// Inline PTX takes string literals and one asm operand per accumulator register, so the
// twenty 64xN variants below (N 32/48/64/96/128, fp16/bf16, A from shared memory or
// registers) are spelled through these macros instead of twenty hand-written operand lists.
// D8(i): registers d[i..i+7] as in-out operands; R16..R64: the first 16..64 operand names for
// the D list.
#define GPT_WGMMA_D8(i)                                                                                      \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
        "+f"(d[i + 7])
#define GPT_WGMMA_D16 GPT_WGMMA_D8(0), GPT_WGMMA_D8(8)
#define GPT_WGMMA_D24 GPT_WGMMA_D16, GPT_WGMMA_D8(16)
#define GPT_WGMMA_D32 GPT_WGMMA_D16, GPT_WGMMA_D8(16), GPT_WGMMA_D8(24)
#define GPT_WGMMA_D48 GPT_WGMMA_D32, GPT_WGMMA_D8(32), GPT_WGMMA_D8(40)
#define GPT_WGMMA_D64 GPT_WGMMA_D32, GPT_WGMMA_D8(32), GPT_WGMMA_D8(40), GPT_WGMMA_D8(48), GPT_WGMMA_D8(56)
#define GPT_WGMMA_R16 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define GPT_WGMMA_R24 GPT_WGMMA_R16 ", %16, %17, %18, %19, %20, %21, %22, %23"
#define GPT_WGMMA_R32 GPT_WGMMA_R24 ", %24, %25, %26, %27, %28, %29, %30, %31"
#define GPT_WGMMA_R48 GPT_WGMMA_R32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define GPT_WGMMA_R64                                                                              \
    GPT_WGMMA_R32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
                  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
// wgmma.mma_async m64nNk16 with fp32 D: A and B from descriptors (SS) or A from four registers
// (RS); the predicate p is scale-d (accumulate into D or overwrite it), imm-scale-a/b are 1.
// The quoted numbers are the operand indices of desc_a, desc_b, scale_d, tnspA, tnspB (SS) or
// a[0..3], desc_b, scale_d, tnspB (RS), which follow D's N/2 registers.
#define GPT_WGMMA_SS(NN, TY, RLIST, DOUT, DA, DB, SC, TA, TB)                                                  \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" SC ", 0;\n"                                           \
                 "wgmma.mma_async.sync.aligned.m64n" NN "k16.f32." TY "." TY " {" RLIST "}, %" DA ", %" DB       \
                 ", p, 1, 1, %" TA ", %" TB ";\n}\n"                                                          \
                 : DOUT                                                                                     \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransA ? 1 : 0), "n"(kTransB ? 1 : 0))
#define GPT_WGMMA_RS(NN, TY, RLIST, DOUT, A0, A1, A2, A3, DB, SC, TB)                                          \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" SC ", 0;\n"                                           \
                 "wgmma.mma_async.sync.aligned.m64n" NN "k16.f32." TY "." TY " {" RLIST "}, {%" A0 ", %" A1     \
                 ", %" A2 ", %" A3 "}, %" DB ", p, 1, 1, %" TB ";\n}\n"                                       \
                 : DOUT                                                                                     \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(kTransB ? 1 : 0))

template <int N, typename T>
struct Shape {
    // 96: head dim 96 (gpt22b-shape) as the N of attention's O = P V; 32 and 48: half of head
    // dims 64 and 96, the dQ columns one of the two-warpgroup backward's warpgroups computes.
    static_assert(N == 32 || N == 48 || N == 64 || N == 96 || N == 128,
                  "wgmma wrappers exist for N = 32, 48, 64, 96 and 128");
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
    constexpr bool bf16 = std::is_same_v<T, __nv_bfloat16>;
    // Operands: D's N/2 registers, then desc_a, desc_b, scale_d, tnspA, tnspB.
    if constexpr (N == 32 && !bf16) GPT_WGMMA_SS("32", "f16", GPT_WGMMA_R16, GPT_WGMMA_D16, "16", "17", "18", "19", "20");
    if constexpr (N == 32 && bf16) GPT_WGMMA_SS("32", "bf16", GPT_WGMMA_R16, GPT_WGMMA_D16, "16", "17", "18", "19", "20");
    if constexpr (N == 48 && !bf16) GPT_WGMMA_SS("48", "f16", GPT_WGMMA_R24, GPT_WGMMA_D24, "24", "25", "26", "27", "28");
    if constexpr (N == 48 && bf16) GPT_WGMMA_SS("48", "bf16", GPT_WGMMA_R24, GPT_WGMMA_D24, "24", "25", "26", "27", "28");
    if constexpr (N == 64 && !bf16) GPT_WGMMA_SS("64", "f16", GPT_WGMMA_R32, GPT_WGMMA_D32, "32", "33", "34", "35", "36");
    if constexpr (N == 64 && bf16) GPT_WGMMA_SS("64", "bf16", GPT_WGMMA_R32, GPT_WGMMA_D32, "32", "33", "34", "35", "36");
    if constexpr (N == 96 && !bf16) GPT_WGMMA_SS("96", "f16", GPT_WGMMA_R48, GPT_WGMMA_D48, "48", "49", "50", "51", "52");
    if constexpr (N == 96 && bf16) GPT_WGMMA_SS("96", "bf16", GPT_WGMMA_R48, GPT_WGMMA_D48, "48", "49", "50", "51", "52");
    if constexpr (N == 128 && !bf16) GPT_WGMMA_SS("128", "f16", GPT_WGMMA_R64, GPT_WGMMA_D64, "64", "65", "66", "67", "68");
    if constexpr (N == 128 && bf16) GPT_WGMMA_SS("128", "bf16", GPT_WGMMA_R64, GPT_WGMMA_D64, "64", "65", "66", "67", "68");
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
    constexpr bool bf16 = std::is_same_v<T, __nv_bfloat16>;
    // Operands: D's N/2 registers, then a[0..3], desc_b, scale_d, tnspB.
    if constexpr (N == 32 && !bf16) GPT_WGMMA_RS("32", "f16", GPT_WGMMA_R16, GPT_WGMMA_D16, "16", "17", "18", "19", "20", "21", "22");
    if constexpr (N == 32 && bf16) GPT_WGMMA_RS("32", "bf16", GPT_WGMMA_R16, GPT_WGMMA_D16, "16", "17", "18", "19", "20", "21", "22");
    if constexpr (N == 48 && !bf16) GPT_WGMMA_RS("48", "f16", GPT_WGMMA_R24, GPT_WGMMA_D24, "24", "25", "26", "27", "28", "29", "30");
    if constexpr (N == 48 && bf16) GPT_WGMMA_RS("48", "bf16", GPT_WGMMA_R24, GPT_WGMMA_D24, "24", "25", "26", "27", "28", "29", "30");
    if constexpr (N == 64 && !bf16) GPT_WGMMA_RS("64", "f16", GPT_WGMMA_R32, GPT_WGMMA_D32, "32", "33", "34", "35", "36", "37", "38");
    if constexpr (N == 64 && bf16) GPT_WGMMA_RS("64", "bf16", GPT_WGMMA_R32, GPT_WGMMA_D32, "32", "33", "34", "35", "36", "37", "38");
    if constexpr (N == 96 && !bf16) GPT_WGMMA_RS("96", "f16", GPT_WGMMA_R48, GPT_WGMMA_D48, "48", "49", "50", "51", "52", "53", "54");
    if constexpr (N == 96 && bf16) GPT_WGMMA_RS("96", "bf16", GPT_WGMMA_R48, GPT_WGMMA_D48, "48", "49", "50", "51", "52", "53", "54");
    if constexpr (N == 128 && !bf16) GPT_WGMMA_RS("128", "f16", GPT_WGMMA_R64, GPT_WGMMA_D64, "64", "65", "66", "67", "68", "69", "70");
    if constexpr (N == 128 && bf16) GPT_WGMMA_RS("128", "bf16", GPT_WGMMA_R64, GPT_WGMMA_D64, "64", "65", "66", "67", "68", "69", "70");
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

#undef GPT_WGMMA_D8
#undef GPT_WGMMA_D16
#undef GPT_WGMMA_D24
#undef GPT_WGMMA_D32
#undef GPT_WGMMA_D48
#undef GPT_WGMMA_D64
#undef GPT_WGMMA_R16
#undef GPT_WGMMA_R24
#undef GPT_WGMMA_R32
#undef GPT_WGMMA_R48
#undef GPT_WGMMA_R64
#undef GPT_WGMMA_SS
#undef GPT_WGMMA_RS
