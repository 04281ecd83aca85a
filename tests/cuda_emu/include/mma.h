// Emulated WMMA (tests/cuda_emu): nvcuda::wmma fragments, loads, stores and mma_sync.
// Every lane holds the whole tile (the hardware spreads it over the warp; our kernels never
// index fragment elements, so only whole-tile semantics matter) and computes the whole
// product; stores write only the lane's share. Each operation is warp-collective as on the
// GPU: it starts with a warp barrier. Products accumulate in fp32, inputs are read
// from 16-bit storage exactly.
#pragma once

#include <type_traits>

#include "cuda_runtime.h"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace detail {
template <typename Use, int M, int N, int K>
struct Shape;
template <int M, int N, int K>
struct Shape<matrix_a, M, N, K> {
    static constexpr int rows = M, cols = K;
};
template <int M, int N, int K>
struct Shape<matrix_b, M, N, K> {
    static constexpr int rows = K, cols = N;
};
template <int M, int N, int K>
struct Shape<accumulator, M, N, K> {
    static constexpr int rows = M, cols = N;
};
inline float to_f(float v) { return v; }
inline float to_f(__half v) { return __half2float(v); }
inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
inline void from_f(float& d, float v) { d = v; }
inline void from_f(__half& d, float v) { d = __float2half_rn(v); }
inline void from_f(__nv_bfloat16& d, float v) { d = __float2bfloat16_rn(v); }
}  // namespace detail

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
    static constexpr int rows = detail::Shape<Use, M, N, K>::rows;
    static constexpr int cols = detail::Shape<Use, M, N, K>::cols;
    static constexpr int num_elements = rows * cols;
    float x[rows * cols];  // row-major whole tile, values of T
    float& at(int r, int c) { return x[r * cols + c]; }
    float at(int r, int c) const { return x[r * cols + c]; }
};

template <typename Use, int M, int N, int K, typename T, typename L>
void fill_fragment(fragment<Use, M, N, K, T, L>& f, float v) {
    ::gpt_emu::warp_barrier();
    for (float& e : f.x) e = v;
}

// matrix_a / matrix_b: the layout is part of the fragment type.
template <typename Use, int M, int N, int K, typename T, typename L, typename P>
void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const P* p, unsigned ldm) {
    static_assert(!std::is_same_v<L, void>, "operand fragments need row_major or col_major");
    ::gpt_emu::warp_barrier();
    using F = fragment<Use, M, N, K, T, L>;
    for (int r = 0; r < F::rows; ++r)
        for (int c = 0; c < F::cols; ++c)
            f.at(r, c) = detail::to_f(std::is_same_v<L, row_major> ? p[r * ldm + c] : p[c * ldm + r]);
}

// accumulator: the layout is an argument.
template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float, void>& f, const float* p, unsigned ldm,
                      layout_t layout) {
    ::gpt_emu::warp_barrier();
    for (int r = 0; r < M; ++r)
        for (int c = 0; c < N; ++c) f.at(r, c) = layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
}

// On the GPU each lane stores the elements it holds; so here, with element e of the tile
// held by lane e % 32 (the hardware's assignment differs, but it too is a partition). A
// lane that reads what others stored without a __syncwarp in between then sees stale data.
template <int M, int N, int K, typename P>
void store_matrix_sync(P* p, const fragment<accumulator, M, N, K, float, void>& f, unsigned ldm,
                       layout_t layout) {
    ::gpt_emu::warp_barrier();
    const int lane = ::gpt_emu::lane_id();
    for (int e = lane; e < M * N; e += 32) {
        const int r = e / N, c = e % N;
        detail::from_f(layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r], f.at(r, c));
    }
}

template <int M, int N, int K, typename T, typename LA, typename LB>
void mma_sync(fragment<accumulator, M, N, K, float, void>& d, const fragment<matrix_a, M, N, K, T, LA>& a,
              const fragment<matrix_b, M, N, K, T, LB>& b, const fragment<accumulator, M, N, K, float, void>& c) {
    ::gpt_emu::warp_barrier();
    float out[M * N];
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = c.at(i, j);
            for (int k = 0; k < K; ++k) acc += a.at(i, k) * b.at(k, j);
            out[i * N + j] = acc;
        }
    for (int e = 0; e < M * N; ++e) d.x[e] = out[e];
}

}  // namespace nvcuda::wmma
