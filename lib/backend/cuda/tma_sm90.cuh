// Hopper's (sm_90a) tensor memory accelerator and the mbarrier it completes: a 2D tile of
// 16-bit elements copied from global to shared memory by one thread, with the 32/64/128-byte
// swizzle that wgmma's descriptors read (wgmma_sm90.cuh), its completion counted in bytes on
// an mbarrier that consumers wait on by phase. As there, the inline PTX is compiled only for
// sm_90a; other device architectures get __trap(), and the CPU emulator substitutes
// gpt_emu/tma.hpp (docs/cuda-emulator.md, "The sm_90 instructions").
//
// Use: the host encodes a TensorMap (make_tensor_map_2d) and passes it to the kernel by
// value as a `const __grid_constant__ TensorMap` parameter; in the kernel one thread
// mbarrier_init(&bar, arrivals) then fence_mbarrier_init() and __syncthreads(); a producer
// thread calls mbarrier_arrive_expect_tx(&bar, bytes) and load_2d(dst, &map, &bar, col, row)
// for those bytes; consumers mbarrier_wait(&bar, phase) (phase 0, 1, 0, ... per reuse).
// dst must be 128-byte aligned, and 8 x the swizzle span (1024 bytes for 128B) when swizzled.
// Also the bulk reduction of fp32 values from shared into global memory (bulk_reduce_add_f32).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/wgmma_sm90.cuh"  // smem_address, GPT_WGMMA_PTX

#if defined(GPT_CUDA_EMU)
#include <gpt_emu/tma.hpp>
#define GPT_GRID_CONSTANT
#else
#include <cuda.h>
#include <cudaTypedefs.h>
#define GPT_GRID_CONSTANT __grid_constant__
#endif

namespace gpt::cuda::tma {

#if defined(GPT_CUDA_EMU)
using TensorMap = ::gpt_emu::TensorMap;
#else
using TensorMap = CUtensorMap;
#endif

// Host: a tensor map over a rows x cols row-major matrix of 16-bit elements at `global`
// (row pitch row_bytes, a multiple of 16), loaded in boxes of box_rows x box_cols, the
// inner box (box_cols * 2 bytes) a multiple of 16 and, when swizzled, equal to the swizzle
// span (swizzle_bytes 0, 32, 64 or 128). Boxes reaching outside the matrix read zeros.
inline cudaError_t make_tensor_map_2d(TensorMap* map, const void* global, std::uint64_t rows, std::uint64_t cols,
                                      std::uint64_t row_bytes, std::uint32_t box_rows, std::uint32_t box_cols,
                                      int swizzle_bytes) {
#if defined(GPT_CUDA_EMU)
    return ::gpt_emu::encode_tensor_map_2d(map, global, rows, cols, row_bytes, box_rows, box_cols, swizzle_bytes);
#else
    // cuTensorMapEncodeTiled is a driver function: found through the runtime, so nothing
    // links libcuda.
    static const auto encode = [] {
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult found{};
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
                cudaSuccess ||
            found != cudaDriverEntryPointSuccess)
            fn = nullptr;
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    }();
    if (!encode) return cudaErrorNotSupported;
    const CUtensorMapSwizzle swizzle = swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                       : swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                       : swizzle_bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                             : CU_TENSOR_MAP_SWIZZLE_NONE;
    const cuuint64_t dims[2] = {cols, rows};
    const cuuint64_t strides[1] = {row_bytes};
    const cuuint32_t box[2] = {box_cols, box_rows};
    const cuuint32_t element_strides[2] = {1, 1};
    const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, const_cast<void*>(global), dims, strides, box,
                              element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
#endif
}

// One thread initialises the barrier for `arrivals` arrivals per phase.
__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, unsigned arrivals) {
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::mbarrier_init(bar, arrivals);
#elif GPT_WGMMA_PTX
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(wgmma::smem_address(bar)), "r"(arrivals) : "memory");
#else
    (void)bar, (void)arrivals;
    __trap();
#endif
}
// Makes the initialisation visible to the async proxy (TMA); then a __syncthreads.
__device__ __forceinline__ void fence_mbarrier_init() {
#if defined(GPT_CUDA_EMU)
#elif GPT_WGMMA_PTX
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#else
    __trap();
#endif
}
// One arrival that also expects `bytes` more transaction bytes (the loads it issues).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(std::uint64_t* bar, unsigned bytes) {
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::mbarrier_arrive(bar, bytes);
#elif GPT_WGMMA_PTX
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(wgmma::smem_address(bar)),
                 "r"(bytes)
                 : "memory");
#else
    (void)bar, (void)bytes;
    __trap();
#endif
}
// One arrival (a consumer releasing a buffer, say).
__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* bar) {
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::mbarrier_arrive(bar, 0);
#elif GPT_WGMMA_PTX
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(wgmma::smem_address(bar)) : "memory");
#else
    (void)bar;
    __trap();
#endif
}
// Waits until the phase of parity `phase` is complete (its arrivals and bytes all in).
__device__ __forceinline__ void mbarrier_wait(std::uint64_t* bar, unsigned phase) {
#if defined(GPT_CUDA_EMU)
    while (!::gpt_emu::mbarrier_try_wait(bar, phase)) ::gpt_emu::spin_point();
#elif GPT_WGMMA_PTX
    const std::uint32_t addr = wgmma::smem_address(bar);
    std::uint32_t done = 0;
    while (!done)
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(addr), "r"(phase)
            : "memory");
#else
    (void)bar, (void)phase;
    __trap();
#endif
}
// The box whose first element is (row, col) of the map's matrix into shared memory at dst;
// its bytes complete on `bar`.
__device__ __forceinline__ void load_2d(void* dst, const TensorMap* map, std::uint64_t* bar, int col, int row) {
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::tma_load_2d(dst, map, bar, col, row);
#elif GPT_WGMMA_PTX
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
        "[%4];\n" ::"r"(wgmma::smem_address(dst)),
        "l"(map), "r"(col), "r"(row), "r"(wgmma::smem_address(bar))
        : "memory");
#else
    (void)dst, (void)map, (void)bar, (void)col, (void)row;
    __trap();
#endif
}

// Bulk reduction (FlashAttention-3's dQ): one thread adds `bytes` bytes of fp32 values in
// shared memory (src) into global memory (dst) element-wise, in L2, as one asynchronous
// operation of the tensor memory accelerator instead of an atomic a value. Both addresses
// 16-byte aligned, bytes a multiple of 16. The threads that wrote src need
// wgmma::fence_proxy_async_shared() and a barrier before it (the copy reads through the
// async proxy). src may be written again only after the issuing thread's
// bulk_wait_group_read covers the operation's group (bulk_commit_group closes a group), and
// the issuing thread must not exit before a wait covers it.
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, const float* src, unsigned bytes) {
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::bulk_reduce_add_f32(dst, src, bytes);
#elif GPT_WGMMA_PTX
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
                 "r"(wgmma::smem_address(src)), "r"(bytes)
                 : "memory");
#else
    (void)dst, (void)src, (void)bytes;
    __trap();
#endif
}
__device__ __forceinline__ void bulk_commit_group() {
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::bulk_commit_group();
#elif GPT_WGMMA_PTX
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#else
    __trap();
#endif
}
// Until all but the newest N of this thread's bulk groups have read their sources (their
// shared memory is free again; the global additions may still be under way).
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::bulk_wait_group(N);
#elif GPT_WGMMA_PTX
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#else
    __trap();
#endif
}
// Until all but the newest N of this thread's bulk groups are complete (before it exits).
template <int N>
__device__ __forceinline__ void bulk_wait_group() {
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::bulk_wait_group(N);
#elif GPT_WGMMA_PTX
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
#else
    __trap();
#endif
}

}  // namespace gpt::cuda::tma
