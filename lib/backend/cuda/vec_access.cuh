// 16-byte loads and stores for the memory-bound kernels (layernorm, the dropout family,
// column sums, cross-entropy): 8 halves or 4 floats per instruction instead of one 2-byte
// access each, which is what lets these kernels run near memory bandwidth. Callers check
// vectorizable() on the host and otherwise launch their element-wise kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>

#include "backend/cuda/cuda_common.cuh"

namespace gpt::cuda {

// Elements of T in one 16-byte access.
template <typename T>
constexpr int kVec = 16 / static_cast<int>(sizeof(T));

inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// Rows of `cols` elements start on 16-byte boundaries when the base pointers do.
template <typename T>
bool vectorizable(std::int64_t cols, std::initializer_list<const void*> ptrs) {
    if (cols % kVec<T> != 0) return false;
    for (const void* p : ptrs)
        if (p != nullptr && !aligned16(p)) return false;
    return true;
}

template <typename T>
__device__ __forceinline__ void load_vec(const T* p, float (&v)[kVec<T>]) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    T e[kVec<T>];
    memcpy(e, &raw, sizeof raw);  // not a cast: the emulator's host compiler would break aliasing
#pragma unroll
    for (int i = 0; i < kVec<T>; ++i) v[i] = ldf(e + i);
}

template <typename T>
__device__ __forceinline__ void store_vec(T* p, const float (&v)[kVec<T>]) {
    T e[kVec<T>];
#pragma unroll
    for (int i = 0; i < kVec<T>; ++i) stf(e + i, v[i]);
    uint4 raw;
    memcpy(&raw, e, sizeof raw);
    *reinterpret_cast<uint4*>(p) = raw;
}

// Threads for a block that covers `packs` 16-byte packs of a row with `per_thread` packs
// each: a multiple of 32 (block_sum's requirement), at most kThreads.
inline int row_threads(std::int64_t packs, int per_thread) {
    const std::int64_t t = (packs + per_thread - 1) / per_thread;
    return static_cast<int>(std::min<std::int64_t>(kThreads, std::max<std::int64_t>(32, (t + 31) / 32 * 32)));
}

}  // namespace gpt::cuda
