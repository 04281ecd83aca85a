// Helpers shared by the CPU kernels: dtype dispatch, fp32 staging of 16-bit data, threading.
//
// Every elementwise kernel is written once on fp32 arrays in loops the compiler vectorises
// (-march picks AVX-512/AVX2, the same source is the portable fallback). 16-bit inputs are
// staged through small per-thread fp32 chunks, so fp16/bf16 cost one conversion per pass.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/dtype.hpp"
#include "core/errors.hpp"
#include "core/half.hpp"

namespace gpt::cpu {

// Elements per staged chunk: 4 KiB of fp32, small enough to stay in L1 with 3 streams.
constexpr std::int64_t kChunk = 1024;
// Below this many elements a loop runs on the calling thread. Memory-bound loops gain little
// from a second core, while a parallel region waits for its slowest thread: on a shared,
// busy node a descheduled thread turns a 0.2 ms layernorm into milliseconds (train_cpu --profile).
constexpr std::int64_t kParallelMin = 1 << 20;

// Calls f(T{}) with T the C++ storage type of dtype.
template <typename F>
decltype(auto) dispatch(DType dtype, F&& f) {
    switch (dtype) {
        case DType::F32: return f(float{});
        case DType::F16: return f(Half{});
        case DType::BF16: return f(BFloat16{});
    }
    GPT_THROW(InternalError, "unknown dtype ", static_cast<int>(dtype));
}

// Read n elements starting at src[i0] as fp32: fp32 data is used in place, 16-bit data is
// converted into buf (n <= buffer size).
template <typename T>
inline const float* load(const void* src, std::int64_t i0, std::int64_t n, float* buf) {
    const T* p = static_cast<const T*>(src) + i0;
    if constexpr (std::is_same_v<T, float>) {
        return p;
    } else {
        convert(p, buf, static_cast<std::size_t>(n));
        return buf;
    }
}

// A norm's gamma [cols] as the fp32 factor it scales by: gamma, or 1 + gamma added in fp32
// under --apply-layernorm-1p (zero_centered_gamma, as Transformer Engine's kernels).
template <typename T>
inline std::vector<float> norm_scale(const void* gamma, std::int64_t cols, bool zero_centered_gamma) {
    std::vector<float> g(static_cast<std::size_t>(cols));
    convert(static_cast<const T*>(gamma), g.data(), static_cast<std::size_t>(cols));
    if (zero_centered_gamma)
        for (float& v : g) v += 1.0f;
    return g;
}

// Where a kernel writes its fp32 result for dst[i0 .. i0+n): in place for fp32, else buf.
template <typename T>
inline float* out_ptr(void* dst, std::int64_t i0, float* buf) {
    if constexpr (std::is_same_v<T, float>) {
        return static_cast<float*>(dst) + i0;
    } else {
        return buf;
    }
}

// Completes out_ptr: converts buf into dst for 16-bit types (no-op for fp32).
template <typename T>
inline void store(const float* buf, void* dst, std::int64_t i0, std::int64_t n) {
    if constexpr (!std::is_same_v<T, float>) {
        convert(buf, static_cast<T*>(dst) + i0, static_cast<std::size_t>(n));
    }
}

// Runs body(i0, n) over [0, total) in kChunk pieces, in parallel when worth it. Chunk
// boundaries do not depend on the thread count.
template <typename Body>
inline void for_chunks(std::int64_t total, Body&& body) {
    std::int64_t nchunks = (total + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (total >= kParallelMin)
    for (std::int64_t c = 0; c < nchunks; ++c) {
        std::int64_t i0 = c * kChunk;
        body(i0, std::min(kChunk, total - i0));
    }
}

// y[i] = f(x[i]) over n elements of type T: f in fp32, its result rounded once to T.
template <typename T, typename F>
inline void map_elements(const void* x, void* y, std::int64_t n, F&& f) {
    for_chunks(n, [&](std::int64_t i0, std::int64_t len) {
        float bx[kChunk], by[kChunk];
        const float* xs = load<T>(x, i0, len, bx);
        float* ys = out_ptr<T>(y, i0, by);
#pragma omp simd
        for (std::int64_t i = 0; i < len; ++i) ys[i] = f(xs[i]);
        store<T>(by, y, i0, len);
    });
}

// y[i] = f(a[i], b[i]) likewise; y may alias a or b (each element is read before it is
// written).
template <typename T, typename F>
inline void map_elements(const void* a, const void* b, void* y, std::int64_t n, F&& f) {
    for_chunks(n, [&](std::int64_t i0, std::int64_t len) {
        float ba[kChunk], bb[kChunk], by[kChunk];
        const float* as = load<T>(a, i0, len, ba);
        const float* bs = load<T>(b, i0, len, bb);
        float* ys = out_ptr<T>(y, i0, by);
#pragma omp simd
        for (std::int64_t i = 0; i < len; ++i) ys[i] = f(as[i], bs[i]);
        store<T>(by, y, i0, len);
    });
}

// Runs body(r, c0, len) over every row r and column chunk [c0, c0+len) of a rows x cols
// matrix, rows in parallel when the matrix is large.
template <typename Body>
inline void for_row_chunks(std::int64_t rows, std::int64_t cols, Body&& body) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c0 = 0; c0 < cols; c0 += kChunk)
            body(r, c0, std::min(kChunk, cols - c0));
}

inline int max_threads() { return omp_get_max_threads(); }

}  // namespace gpt::cpu
