// Layernorm forward and backward: a block per row, two-pass statistics in fp32, and
// deterministic dgamma/dbeta from per-chunk partials added in order. gamma_shift is 1 under
// --apply-layernorm-1p (the kernels scale by gamma + 1 in fp32), else 0. The forward kernels
// with Q also write the FP8 codes of y as stored (Backend::norm_forward_fp8).
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_codes.cuh"
#include "backend/cuda/vec_access.cuh"

namespace gpt::cuda {

namespace {

// Two passes over the row (mean, then the centred variance) as the CPU reference: no
// cancellation for rows with a large mean.
template <typename T, bool Q>
__global__ void ln_fwd_kernel(const T* x, const T* gamma, const T* beta, T* y, float* mean,
                              float* rstd, std::int64_t rows, std::int64_t cols, float eps,
                              float gamma_shift, Fp8CodesArg codes, NormRows at) {
    __shared__ float sh[32];
    unsigned m = 0;
    [[maybe_unused]] const float scale = Q ? *codes.scale : 1.0f;
    GPT_ROW_LOOP(r, rows) {
        const std::int64_t base = norm_row(at, r) * cols;
        const T* xr = x + base;
        float s = 0.0f;
        for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) s += ldf(xr + i);
        const float mu = block_sum(s, sh) / static_cast<float>(cols);
        float v = 0.0f;
        for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
            const float d = ldf(xr + i) - mu;
            v += d * d;
        }
        const float rs = rsqrtf(block_sum(v, sh) / static_cast<float>(cols) + eps);
        T* yr = y + base;
        for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
            const float v = (ldf(xr + i) - mu) * rs * (ldf(gamma + i) + gamma_shift) + ldf(beta + i);
            stf(yr + i, v);
            if constexpr (Q) store_codes<T, 1>({v}, scale, codes.e4m3, codes.q + r * cols + i, m);
        }
        if (threadIdx.x == 0) {
            mean[r] = mu;
            rstd[r] = rs;
        }
    }
    if constexpr (Q)
        if (codes.amax) amax_commit(m, codes.amax);
}

// dgamma/dbeta partials over a chunk of rows (deterministic, like column sums).
template <typename T>
__global__ void ln_param_partials_kernel(const T* dy, const T* x, const float* mean,
                                         const float* rstd, float* pg, float* pb,
                                         std::int64_t rows, std::int64_t cols,
                                         std::int64_t rows_per_chunk, NormRows at) {
    const std::int64_t col = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
    if (col >= cols) return;
    const std::int64_t r0 = blockIdx.y * rows_per_chunk;
    const std::int64_t r1 = min(rows, r0 + rows_per_chunk);
    float ag = 0.0f, ab = 0.0f;
    for (std::int64_t r = r0; r < r1; ++r) {
        const std::int64_t base = norm_row(at, r) * cols;
        const float d = ldf(dy + base + col);
        ag += d * (ldf(x + base + col) - mean[r]) * rstd[r];
        ab += d;
    }
    pg[blockIdx.y * cols + col] = ag;
    pb[blockIdx.y * cols + col] = ab;
}

template <typename T>
__global__ void ln_dx_kernel(const T* dy, const T* x, const T* gamma, float gamma_shift, const float* mean,
                             const float* rstd, const T* dres, T* dx, std::int64_t rows,
                             std::int64_t cols, NormRows at) {
    __shared__ float sh[32];
    GPT_ROW_LOOP(r, rows) {
        const float mu = mean[r], rs = rstd[r];
        const std::int64_t base = norm_row(at, r) * cols;
        float c1 = 0.0f, c2 = 0.0f;
        for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
            const float dyg = ldf(dy + base + i) * (ldf(gamma + i) + gamma_shift);
            c1 += dyg;
            c2 += dyg * (ldf(x + base + i) - mu) * rs;
        }
        c1 = block_sum(c1, sh) / static_cast<float>(cols);
        c2 = block_sum(c2, sh) / static_cast<float>(cols);
        // Each element is read and then written by the same thread: dx may alias dy or dres.
        for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
            const float dyg = ldf(dy + base + i) * (ldf(gamma + i) + gamma_shift);
            const float xhat = (ldf(x + base + i) - mu) * rs;
            const float res = dres ? ldf(dres + base + i) : 0.0f;
            stf(dx + base + i, res + (dyg - c1 - xhat * c2) * rs);
        }
        __syncthreads();
    }
}

// Vectorized layernorm for rows of at most kThreads x kMaxRowPacks 16-byte packs (8192
// halves, 4096 floats) whose rows start 16-byte aligned: each thread holds its K packs of
// the row in registers, so x (and dy) are read from memory once. Thread t owns the packs
// t, t + blockDim, ... of every row, the same columns each row, so the backward kernel
// accumulates dgamma/dbeta for them in registers across its block's rows.
constexpr int kMaxRowPacks = 4;

template <typename T, int K, bool Q>
__global__ void ln_fwd_vec_kernel(const T* x, const T* gamma, const T* beta, T* y, float* mean,
                                  float* rstd, std::int64_t rows, int cols, float eps,
                                  float gamma_shift, Fp8CodesArg codes, NormRows at) {
    constexpr int N = kVec<T>;
    __shared__ float sh[32];
    const int packs = cols / N;
    unsigned m = 0;
    [[maybe_unused]] const float scale = Q ? *codes.scale : 1.0f;
    GPT_ROW_LOOP(r, rows) {
        const std::int64_t base = norm_row(at, r) * cols;
        const T* xr = x + base;
        float v[K][N];
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int p = threadIdx.x + k * blockDim.x;
            if (p < packs) {
                load_vec(xr + p * N, v[k]);
#pragma unroll
                for (int i = 0; i < N; ++i) s += v[k][i];
            }
        }
        const float mu = block_sum(s, sh) / static_cast<float>(cols);
        float q = 0.0f;
#pragma unroll
        for (int k = 0; k < K; ++k)
            if (threadIdx.x + k * blockDim.x < packs)
#pragma unroll
                for (int i = 0; i < N; ++i) {
                    const float d = v[k][i] - mu;
                    q += d * d;
                }
        const float rs = rsqrtf(block_sum(q, sh) / static_cast<float>(cols) + eps);
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int p = threadIdx.x + k * blockDim.x;
            if (p < packs) {
                float g[N], b[N];
                load_vec(gamma + p * N, g);
                load_vec(beta + p * N, b);
#pragma unroll
                for (int i = 0; i < N; ++i) v[k][i] = (v[k][i] - mu) * rs * (g[i] + gamma_shift) + b[i];
                store_vec(y + base + p * N, v[k]);
                if constexpr (Q) store_codes<T, N>(v[k], scale, codes.e4m3, codes.q + r * cols + p * N, m);
            }
        }
        if (threadIdx.x == 0) {
            mean[r] = mu;
            rstd[r] = rs;
        }
    }
    if constexpr (Q)
        if (codes.amax) amax_commit(m, codes.amax);
}

// Block b takes rows [b * rpb, (b + 1) * rpb): dx for each, and its dgamma/dbeta partial
// sums (in row order) into pg/pb[b, :], which add_chunk_sums adds in block order.
template <typename T, int K>
__global__ void ln_bwd_vec_kernel(const T* dy, const T* x, const T* gamma, float gamma_shift,
                                  const float* mean, const float* rstd, const T* dres, T* dx, float* pg,
                                  float* pb, std::int64_t rows, int cols, std::int64_t rpb, NormRows at) {
    constexpr int N = kVec<T>;
    __shared__ float sh[32];
    const int packs = cols / N;
    float g[K][N], ag[K][N], ab[K][N];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int p = threadIdx.x + k * blockDim.x;
#pragma unroll
        for (int i = 0; i < N; ++i) ag[k][i] = ab[k][i] = g[k][i] = 0.0f;
        if (p < packs) {
            load_vec(gamma + p * N, g[k]);
#pragma unroll
            for (int i = 0; i < N; ++i) g[k][i] += gamma_shift;
        }
    }
    const std::int64_t r0 = blockIdx.x * rpb;
    const std::int64_t r1 = min(rows, r0 + rpb);
    for (std::int64_t r = r0; r < r1; ++r) {
        const float mu = mean[r], rs = rstd[r];
        const std::int64_t base = norm_row(at, r) * cols;
        float d[K][N], xh[K][N];
        float c1 = 0.0f, c2 = 0.0f;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int p = threadIdx.x + k * blockDim.x;
            if (p < packs) {
                load_vec(dy + base + p * N, d[k]);
                load_vec(x + base + p * N, xh[k]);
#pragma unroll
                for (int i = 0; i < N; ++i) {
                    xh[k][i] = (xh[k][i] - mu) * rs;
                    ag[k][i] += d[k][i] * xh[k][i];
                    ab[k][i] += d[k][i];
                    const float dyg = d[k][i] * g[k][i];
                    c1 += dyg;
                    c2 += dyg * xh[k][i];
                }
            }
        }
        c1 = block_sum(c1, sh) / static_cast<float>(cols);
        c2 = block_sum(c2, sh) / static_cast<float>(cols);
        // Each element is read and then written by the same thread: dx may alias dy or dres.
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int p = threadIdx.x + k * blockDim.x;
            if (p < packs) {
                float res[N];
                if (dres) {
                    load_vec(dres + base + p * N, res);
                } else {
#pragma unroll
                    for (int i = 0; i < N; ++i) res[i] = 0.0f;
                }
#pragma unroll
                for (int i = 0; i < N; ++i)
                    res[i] += (d[k][i] * g[k][i] - c1 - xh[k][i] * c2) * rs;
                store_vec(dx + base + p * N, res);
            }
        }
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int p = threadIdx.x + k * blockDim.x;
        if (p < packs)
#pragma unroll
            for (int i = 0; i < N; ++i) {
                pg[blockIdx.x * static_cast<std::int64_t>(cols) + p * N + i] = ag[k][i];
                pb[blockIdx.x * static_cast<std::int64_t>(cols) + p * N + i] = ab[k][i];
            }
    }
}

// Calls f(std::integral_constant<int, K>) with the packs per thread a row of `cols` needs;
// false (nothing called) when the row is too long for the vectorized kernels.
template <typename T, typename F>
bool with_row_packs(std::int64_t cols, F&& f) {
    const std::int64_t per_thread = (cols / kVec<T> + kThreads - 1) / kThreads;
    switch (per_thread) {
        case 1: f(std::integral_constant<int, 1>{}); return true;
        case 2: f(std::integral_constant<int, 2>{}); return true;
        case 3: f(std::integral_constant<int, 3>{}); return true;
        case kMaxRowPacks: f(std::integral_constant<int, kMaxRowPacks>{}); return true;
        default: return false;
    }
}

}  // namespace

namespace {

// The forward's launch, with (Q) or without the FP8 codes of y.
template <bool Q>
void launch_ln_forward(cudaStream_t stream, const void* x, const void* gamma, const void* beta, void* y,
                       float* mean, float* rstd, std::int64_t rows, std::int64_t cols, float eps, DType dtype,
                       bool zero_centered_gamma, const Fp8CodesArg& codes, const NormRows& at = {}) {
    const float gamma_shift = zero_centered_gamma ? 1.0f : 0.0f;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        if (vectorizable<T>(cols, {x, gamma, beta, y, codes.q}) &&
            with_row_packs<T>(cols, [&](auto k) {
                constexpr int K = decltype(k)::value;
                ln_fwd_vec_kernel<T, K, Q><<<row_grid(rows), row_threads(cols / kVec<T>, K), 0, stream>>>(
                    static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(beta),
                    static_cast<T*>(y), mean, rstd, rows, static_cast<int>(cols), eps, gamma_shift, codes, at);
            }))
            return;
        ln_fwd_kernel<T, Q><<<row_grid(rows), kThreads, 0, stream>>>(
            static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(beta),
            static_cast<T*>(y), mean, rstd, rows, cols, eps, gamma_shift, codes, at);
    });
}

}  // namespace

void CudaBackend::do_layernorm_forward(const void* x, const void* gamma, const void* beta, void* y,
                                       float* mean, float* rstd, std::int64_t rows,
                                       std::int64_t cols, float eps, DType dtype, bool zero_centered_gamma,
                                       const NormRows& at) {
    if (rows == 0) return;
    launch_ln_forward<false>(cuda_stream(stream()), x, gamma, beta, y, mean, rstd, rows, cols, eps, dtype,
                             zero_centered_gamma, {}, at);
    GPT_CUDA_LAUNCH_CHECK("layernorm_forward");
}

void CudaBackend::do_norm_forward_fp8(bool rmsnorm, const void* x, const void* gamma, const void* beta, void* y,
                                      float* mean, float* rstd, std::int64_t rows, std::int64_t cols, float eps,
                                      DType dtype, const Fp8Codes& codes, bool zero_centered_gamma) {
    if (rows == 0) return;
    if (rmsnorm) {
        launch_rms_forward(x, gamma, y, rstd, rows, cols, eps, dtype, &codes, zero_centered_gamma);
        return;
    }
    launch_ln_forward<true>(cuda_stream(stream()), x, gamma, beta, y, mean, rstd, rows, cols, eps, dtype,
                            zero_centered_gamma, codes_arg(&codes));
    GPT_CUDA_LAUNCH_CHECK("layernorm_forward (with FP8 codes)");
}

void CudaBackend::do_layernorm_backward(const void* dy, const void* x, const void* gamma,
                                        const float* mean, const float* rstd, const void* dresidual,
                                        void* dx, float* dgamma, float* dbeta, std::int64_t rows,
                                        std::int64_t cols, DType dtype, bool zero_centered_gamma,
                                        const NormRows& at) {
    if (rows == 0) return;
    const float gamma_shift = zero_centered_gamma ? 1.0f : 0.0f;
    // Chunks of rows: one per block of the vectorized kernel, one per partial row of the
    // element-wise one; dgamma/dbeta are added from their partials in chunk order.
    const std::int64_t rpc = rows_per_chunk(rows);
    const std::int64_t chunks = (rows + rpc - 1) / rpc;
    Scratch partial(*this, static_cast<std::size_t>(2 * chunks * cols) * sizeof(float));
    float* pg = partial.as<float>();
    float* pb = pg + chunks * cols;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        const bool vec = vectorizable<T>(cols, {dy, x, gamma, dresidual, dx}) &&
                         with_row_packs<T>(cols, [&](auto k) {
                             constexpr int K = decltype(k)::value;
                             ln_bwd_vec_kernel<T, K><<<static_cast<unsigned>(chunks), row_threads(cols / kVec<T>, K), 0, cuda_stream(stream())>>>(
                                 static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(gamma),
                                 gamma_shift, mean, rstd, static_cast<const T*>(dresidual), static_cast<T*>(dx),
                                 pg, pb, rows, static_cast<int>(cols), rpc, at);
                         });
        if (vec) return;
        // Parameter gradients first: they read dy, which dx may overwrite.
        const dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads), static_cast<unsigned>(chunks));
        ln_param_partials_kernel<T><<<grid, kThreads, 0, cuda_stream(stream())>>>(
            static_cast<const T*>(dy), static_cast<const T*>(x), mean, rstd, pg, pb, rows, cols, rpc, at);
        ln_dx_kernel<T><<<row_grid(rows), kThreads, 0, cuda_stream(stream())>>>(
            static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(gamma), gamma_shift,
            mean, rstd, static_cast<const T*>(dresidual), static_cast<T*>(dx), rows, cols, at);
    });
    GPT_CUDA_LAUNCH_CHECK("layernorm_backward");
    add_chunk_sums(pg, dgamma, chunks, cols);
    add_chunk_sums(pb, dbeta, chunks, cols);
}

}  // namespace gpt::cuda
