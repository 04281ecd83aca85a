// Shared-memory tiles of the sm_90 (wgmma) attention kernels in the canonical no-swizzle
// layouts of wgmma_sm90.cuh: 8x8 core matrices of 128 contiguous bytes, written with plain
// 16-byte stores (load_tile) or 16-byte cp.async copies (load_tile_async, for double
// buffering: the copy needs no registers and lands while the warpgroup computes). Used by the backward (attention_flash_sm90_bwd.cu) and the basic forward
// (attention_flash_sm90.cu); the warp-specialised forward's tiles are TMA's swizzled ones, the
// warp-specialised backward's TMA's unswizzled ones (kmajor_desc_tma below).
//
// One stored [64 rows][HN] tile serves both orientations: kmajor_at(r, c) == nmajor_at(c, r),
// so the same bytes are a K-major operand (rows along M or N, k = the HN columns) through
// kmajor_desc and an N-major (or M-major) one (n = the HN columns, k = the 64 rows) through
// nmajor_desc. Attention's backward uses this to read Q, dO and K both ways.
#pragma once

#include <cstdint>

#include "backend/cuda/wgmma_sm90.cuh"

namespace gpt::cuda::sm90tiles {

// Byte offset of element (row, k) of a K-major tile whose k runs over HN: the HN / 8 core
// matrices of a row group side by side, row groups after one another.
template <int HN>
__device__ __forceinline__ int kmajor_at(int row, int k) {
    return (row / 8 * (HN / 8) + k / 8) * 128 + row % 8 * 16 + k % 8 * 2;
}
// Byte offset of element (n, k) of an N-major tile HN wide (n) and 64 deep (k): core
// matrices of 8 n x 8 k, the HN / 8 of a k group side by side.
template <int HN>
__device__ __forceinline__ int nmajor_at(int n, int k) {
    return (k / 8 * (HN / 8) + n / 8) * 128 + k % 8 * 16 + n % 8 * 2;
}
// Descriptors of k step `step` (16 deep) of those tiles. K-major: LBO = the next 8 k (the
// core matrix beside), SBO = the next 8 rows. N-major: LBO = the next 8 k (a whole row of
// HN / 8 core matrices on), SBO = the next 8 n. An N-major operand narrower than HN (N = 64
// of HN = 128) starts n0 / 8 core matrices on: tile + n0 * 16 bytes.
template <int HN>
__device__ __forceinline__ std::uint64_t kmajor_desc(const unsigned char* tile, int step) {
    return wgmma::make_desc(tile + step * 256, 128, (HN / 8) * 128, wgmma::Swizzle::None);
}
template <int HN>
__device__ __forceinline__ std::uint64_t nmajor_desc(const unsigned char* tile, int step) {
    return wgmma::make_desc(tile + step * 2 * (HN / 8) * 128, (HN / 8) * 128, 128, wgmma::Swizzle::None);
}

// Calls f(r, c) for each 16-byte chunk (row r of 64, first column c) of a tile, the block's
// threads taking them in turn: the split both tile loads share.
template <int HN, typename F>
__device__ __forceinline__ void for_each_tile_chunk(F f) {
    constexpr int kChunks = HN / 8;
    for (int e = threadIdx.x; e < 64 * kChunks; e += blockDim.x) f(e / kChunks, e % kChunks * 8);
}

// Rows [r0, r0 + 64) (row stride ld elements) of a 16-bit tensor into a K-major tile, 16
// bytes (8 elements of one row) per store; rows at or past s are zeros.
template <int HN, typename T>
__device__ __forceinline__ void load_tile(unsigned char* tile, const T* base, std::int64_t r0, std::int64_t s,
                                          std::int64_t ld) {
    for_each_tile_chunk<HN>([&](int r, int c) {
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r0 + r < s) v = *reinterpret_cast<const uint4*>(base + (r0 + r) * ld + c);
        *reinterpret_cast<uint4*>(tile + kmajor_at<HN>(r, c)) = v;
    });
}

// The same tile with cp.async (mma_sm80.cuh): 16 bytes per copy into the same canonical
// layout, rows at or past s zero-filled (source size 0: the source, row 0, is not read). The
// bytes land at this thread's cp_async_wait covering the commit group; other threads' copies
// then need a barrier, and wgmma's reads a fence_proxy_async_shared (cp.async writes through
// the generic proxy) by every writer before it.
template <int HN, typename T>
__device__ __forceinline__ void load_tile_async(unsigned char* tile, const T* base, std::int64_t r0, std::int64_t s,
                                                std::int64_t ld) {
    for_each_tile_chunk<HN>([&](int r, int c) {
        const bool valid = r0 + r < s;
        cp_async_16(tile + kmajor_at<HN>(r, c), base + (valid ? r0 + r : 0) * ld + c, valid);
    });
}

// The same roles in the layout that TMA writes without swizzle (sm90-bwd-ws): a box of 64 rows
// x 8 columns (16 bytes, the narrowest TMA box) lands as 64 rows of 16 bytes one after another,
// 8 core matrices down a column of 8; the HN / 8 boxes of a tile side by side, 1024 bytes
// apart. Element (row, k) at (k / 8 * 64 + row) * 16 + k % 8 * 2, so a K-major operand's core
// matrices are LBO = 1024 (the next 8 k) and SBO = 128 (the next 8 rows) apart, an N-major
// one's (n = the columns) LBO = 128 (the next 8 k = rows) and SBO = 1024 (the next 8 n); an
// N-major operand from column n0 starts n0 / 8 boxes on: tile + n0 * 128 bytes.
__device__ __forceinline__ std::uint64_t kmajor_desc_tma(const unsigned char* tile, int step) {
    return wgmma::make_desc(tile + step * 2048, 1024, 128, wgmma::Swizzle::None);
}
__device__ __forceinline__ std::uint64_t nmajor_desc_tma(const unsigned char* tile, int step) {
    return wgmma::make_desc(tile + step * 256, 128, 1024, wgmma::Swizzle::None);
}

}  // namespace gpt::cuda::sm90tiles
