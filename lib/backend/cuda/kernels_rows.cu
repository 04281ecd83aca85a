// Row-wise ops: layernorm, the vocab-parallel cross-entropy pieces, and embeddings.
// One block per row where a row is reduced; statistics and accumulation in fp32.
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/vec_access.cuh"

namespace gpt::cuda {

namespace {

#define GPT_GRID_STRIDE(i, n)                                                                \
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; \
         i < (n); i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

// Rows go to blocks in a grid-stride loop, so any row count fits the grid limits.
#define GPT_ROW_LOOP(r, rows) \
    for (std::int64_t r = blockIdx.x; r < (rows); r += gridDim.x)

inline unsigned row_grid(std::int64_t rows) {
    return static_cast<unsigned>(std::max<std::int64_t>(1, std::min<std::int64_t>(rows, 65535)));
}

// ---- layernorm ---------------------------------------------------------------------------

// Two passes over the row (mean, then the centred variance) as the CPU reference: no
// cancellation for rows with a large mean.
template <typename T>
__global__ void ln_fwd_kernel(const T* x, const T* gamma, const T* beta, T* y, float* mean,
                              float* rstd, std::int64_t rows, std::int64_t cols, float eps) {
    __shared__ float sh[32];
    GPT_ROW_LOOP(r, rows) {
        const T* xr = x + r * cols;
        float s = 0.0f;
        for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) s += ldf(xr + i);
        const float mu = block_sum(s, sh) / static_cast<float>(cols);
        float v = 0.0f;
        for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
            const float d = ldf(xr + i) - mu;
            v += d * d;
        }
        const float rs = rsqrtf(block_sum(v, sh) / static_cast<float>(cols) + eps);
        T* yr = y + r * cols;
        for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x)
            stf(yr + i, (ldf(xr + i) - mu) * rs * ldf(gamma + i) + ldf(beta + i));
        if (threadIdx.x == 0) {
            mean[r] = mu;
            rstd[r] = rs;
        }
    }
}

// dgamma/dbeta partials over a chunk of rows (deterministic, like column sums).
template <typename T>
__global__ void ln_param_partials_kernel(const T* dy, const T* x, const float* mean,
                                         const float* rstd, float* pg, float* pb,
                                         std::int64_t rows, std::int64_t cols,
                                         std::int64_t rows_per_chunk) {
    const std::int64_t col = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
    if (col >= cols) return;
    const std::int64_t r0 = blockIdx.y * rows_per_chunk;
    const std::int64_t r1 = min(rows, r0 + rows_per_chunk);
    float ag = 0.0f, ab = 0.0f;
    for (std::int64_t r = r0; r < r1; ++r) {
        const float d = ldf(dy + r * cols + col);
        ag += d * (ldf(x + r * cols + col) - mean[r]) * rstd[r];
        ab += d;
    }
    pg[blockIdx.y * cols + col] = ag;
    pb[blockIdx.y * cols + col] = ab;
}

template <typename T>
__global__ void ln_dx_kernel(const T* dy, const T* x, const T* gamma, const float* mean,
                             const float* rstd, const T* dres, T* dx, std::int64_t rows,
                             std::int64_t cols) {
    __shared__ float sh[32];
    GPT_ROW_LOOP(r, rows) {
        const float mu = mean[r], rs = rstd[r];
        float c1 = 0.0f, c2 = 0.0f;
        for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
            const float dyg = ldf(dy + r * cols + i) * ldf(gamma + i);
            c1 += dyg;
            c2 += dyg * (ldf(x + r * cols + i) - mu) * rs;
        }
        c1 = block_sum(c1, sh) / static_cast<float>(cols);
        c2 = block_sum(c2, sh) / static_cast<float>(cols);
        // Each element is read and then written by the same thread: dx may alias dy or dres.
        for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
            const float dyg = ldf(dy + r * cols + i) * ldf(gamma + i);
            const float xhat = (ldf(x + r * cols + i) - mu) * rs;
            const float res = dres ? ldf(dres + r * cols + i) : 0.0f;
            stf(dx + r * cols + i, res + (dyg - c1 - xhat * c2) * rs);
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

template <typename T, int K>
__global__ void ln_fwd_vec_kernel(const T* x, const T* gamma, const T* beta, T* y, float* mean,
                                  float* rstd, std::int64_t rows, int cols, float eps) {
    constexpr int N = kVec<T>;
    __shared__ float sh[32];
    const int packs = cols / N;
    GPT_ROW_LOOP(r, rows) {
        const T* xr = x + r * cols;
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
                for (int i = 0; i < N; ++i) v[k][i] = (v[k][i] - mu) * rs * g[i] + b[i];
                store_vec(y + r * cols + p * N, v[k]);
            }
        }
        if (threadIdx.x == 0) {
            mean[r] = mu;
            rstd[r] = rs;
        }
    }
}

// Block b takes rows [b * rpb, (b + 1) * rpb): dx for each, and its dgamma/dbeta partial
// sums (in row order) into pg/pb[b, :], which add_chunk_sums adds in block order.
template <typename T, int K>
__global__ void ln_bwd_vec_kernel(const T* dy, const T* x, const T* gamma, const float* mean,
                                  const float* rstd, const T* dres, T* dx, float* pg, float* pb,
                                  std::int64_t rows, int cols, std::int64_t rpb) {
    constexpr int N = kVec<T>;
    __shared__ float sh[32];
    const int packs = cols / N;
    float g[K][N], ag[K][N], ab[K][N];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int p = threadIdx.x + k * blockDim.x;
#pragma unroll
        for (int i = 0; i < N; ++i) ag[k][i] = ab[k][i] = g[k][i] = 0.0f;
        if (p < packs) load_vec(gamma + p * N, g[k]);
    }
    const std::int64_t r0 = blockIdx.x * rpb;
    const std::int64_t r1 = min(rows, r0 + rpb);
    for (std::int64_t r = r0; r < r1; ++r) {
        const float mu = mean[r], rs = rstd[r];
        float d[K][N], xh[K][N];
        float c1 = 0.0f, c2 = 0.0f;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int p = threadIdx.x + k * blockDim.x;
            if (p < packs) {
                load_vec(dy + r * cols + p * N, d[k]);
                load_vec(x + r * cols + p * N, xh[k]);
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
                    load_vec(dres + r * cols + p * N, res);
                } else {
#pragma unroll
                    for (int i = 0; i < N; ++i) res[i] = 0.0f;
                }
#pragma unroll
                for (int i = 0; i < N; ++i)
                    res[i] += (d[k][i] * g[k][i] - c1 - xh[k][i] * c2) * rs;
                store_vec(dx + r * cols + p * N, res);
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

// ---- cross-entropy -------------------------------------------------------------------------

template <typename T>
__global__ void ce_max_kernel(const T* logits, float* row_max, std::int64_t rows, std::int64_t v) {
    __shared__ float sh[32];
    GPT_ROW_LOOP(r, rows) {
        float m = -INFINITY;
        for (std::int64_t i = threadIdx.x; i < v; i += blockDim.x) m = fmaxf(m, ldf(logits + r * v + i));
        m = block_max(m, sh);
        if (threadIdx.x == 0) row_max[r] = m;
    }
}

template <typename T>
__global__ void ce_sums_kernel(const T* logits, const std::int32_t* targets, const float* row_max,
                               float* sum_exp, float* target_logit, std::int64_t rows,
                               std::int64_t v, std::int64_t vocab_start) {
    __shared__ float sh[32];
    GPT_ROW_LOOP(r, rows) {
        const float m = row_max[r];
        float s = 0.0f;
        for (std::int64_t i = threadIdx.x; i < v; i += blockDim.x) s += expf(ldf(logits + r * v + i) - m);
        s = block_sum(s, sh);
        if (threadIdx.x == 0) {
            sum_exp[r] = s;
            const std::int64_t t = static_cast<std::int64_t>(targets[r]) - vocab_start;
            target_logit[r] = (t >= 0 && t < v) ? ldf(logits + r * v + t) : 0.0f;
        }
    }
}

// Online softmax statistics in one read: each thread keeps a running (max, sum) pair, and
// the block merges the pairs by rescaling every sum to the row maximum.
// kVecRows: rows of 16-byte packs (vectorizable), read a pack per load.
template <typename T, bool kVecRows>
__global__ void ce_stats_kernel(const T* logits, const std::int32_t* targets, float* local_max,
                                float* sum_exp, float* target_logit, std::int64_t rows,
                                std::int64_t v, std::int64_t vocab_start) {
    constexpr int N = kVec<T>;
    __shared__ float sh[32];
    GPT_ROW_LOOP(r, rows) {
        float m = -INFINITY, s = 0.0f;
        auto visit = [&](float l) {
            if (l > m) {
                s = s * expf(m - l) + 1.0f;  // expf(-inf) = 0 on the first element
                m = l;
            } else {
                s += expf(l - m);  // NaN logits propagate into the sum, as on the CPU
            }
        };
        if constexpr (kVecRows) {
            for (std::int64_t p = threadIdx.x; p < v / N; p += blockDim.x) {
                float e[N];
                load_vec(logits + r * v + p * N, e);
#pragma unroll
                for (int i = 0; i < N; ++i) visit(e[i]);
            }
        } else {
            for (std::int64_t i = threadIdx.x; i < v; i += blockDim.x) visit(ldf(logits + r * v + i));
        }
        const float row_m = block_max(m, sh);
        const float scaled = m == -INFINITY ? 0.0f * s : s * expf(m - row_m);
        const float total = block_sum(scaled, sh);
        if (threadIdx.x == 0) {
            local_max[r] = row_m;
            sum_exp[r] = total;
            const std::int64_t t = static_cast<std::int64_t>(targets[r]) - vocab_start;
            target_logit[r] = (t >= 0 && t < v) ? ldf(logits + r * v + t) : 0.0f;
        }
    }
}

__global__ void ce_loss_kernel(const float* row_max, const float* sum_exp, const float* target_logit,
                               float* loss, std::int64_t rows) {
    GPT_GRID_STRIDE(r, rows) loss[r] = logf(sum_exp[r]) + row_max[r] - target_logit[r];
}

// A block per row: the row's statistics are read once and no thread divides by v (64-bit
// division per element cost more than the element's memory traffic over rows x 50k logits).
template <typename T, bool kVecRows>
__global__ void ce_bwd_kernel(const T* logits, const std::int32_t* targets, const float* row_max,
                              const float* sum_exp, const float* dloss, T* dlogits,
                              std::int64_t rows, std::int64_t v, std::int64_t vocab_start) {
    constexpr int N = kVec<T>;
    GPT_ROW_LOOP(r, rows) {
        const float m = row_max[r], scale = dloss[r] / sum_exp[r];
        const std::int64_t t = static_cast<std::int64_t>(targets[r]) - vocab_start;
        const T* in = logits + r * v;
        T* out = dlogits + r * v;
        if constexpr (kVecRows) {
            // dlogits may alias logits: each pack is read, then written, by one thread.
            for (std::int64_t p = threadIdx.x; p < v / N; p += blockDim.x) {
                float e[N];
                load_vec(in + p * N, e);
#pragma unroll
                for (int i = 0; i < N; ++i) {
                    e[i] = expf(e[i] - m) * scale;
                    if (p * N + i == t) e[i] -= dloss[r];
                }
                store_vec(out + p * N, e);
            }
        } else {
            for (std::int64_t j = threadIdx.x; j < v; j += blockDim.x) {
                float d = expf(ldf(in + j) - m) * scale;
                if (j == t) d -= dloss[r];
                stf(out + j, d);
            }
        }
    }
}

// ---- embeddings ----------------------------------------------------------------------------

// out [s, b, h]: token (si, bi) is row t = si*b + bi; tokens are [b, s].
template <typename T>
__global__ void emb_fwd_kernel(const std::int32_t* tokens, const T* table, T* out, std::int64_t b,
                               std::int64_t s, std::int64_t h, std::int64_t vs, std::int64_t ve) {
    // A block per token row: the token id is looked up once, no division per element.
    GPT_ROW_LOOP(t, s * b) {
        const std::int64_t id = tokens[(t % b) * s + t / b];
        T* o = out + t * h;
        if (id >= vs && id < ve) {
            const T* row = table + (id - vs) * h;
            for (std::int64_t c = threadIdx.x; c < h; c += blockDim.x) o[c] = row[c];
        } else {
            for (std::int64_t c = threadIdx.x; c < h; c += blockDim.x) stf(o + c, 0.0f);
        }
    }
}

// Repeated tokens add into one table row: fp32 atomics (summation order, hence the last
// bits, may differ between runs; the CPU backend is the deterministic reference).
template <typename T>
__global__ void emb_bwd_kernel(const std::int32_t* tokens, const T* dout, float* dtable,
                               std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t vs,
                               std::int64_t ve) {
    GPT_ROW_LOOP(t, s * b) {
        const std::int64_t id = tokens[(t % b) * s + t / b];
        if (id < vs || id >= ve) continue;
        float* row = dtable + (id - vs) * h;
        for (std::int64_t c = threadIdx.x; c < h; c += blockDim.x) atomicAdd(row + c, ldf(dout + t * h + c));
    }
}

template <typename T>
__global__ void pos_fwd_kernel(const T* table, T* out, std::int64_t b, std::int64_t s,
                               std::int64_t h, std::int64_t first) {
    GPT_ROW_LOOP(t, s * b) {
        const T* row = table + (first + t / b) * h;
        T* o = out + t * h;
        for (std::int64_t c = threadIdx.x; c < h; c += blockDim.x) stf(o + c, ldf(o + c) + ldf(row + c));
    }
}

// One thread per (position, column) sums over the batch in order: deterministic.
template <typename T>
__global__ void pos_bwd_kernel(const T* dout, float* dtable, std::int64_t b, std::int64_t s,
                               std::int64_t h, std::int64_t first) {
    GPT_GRID_STRIDE(i, s * h) {
        const std::int64_t si = i / h, c = i % h;
        float acc = 0.0f;
        for (std::int64_t bi = 0; bi < b; ++bi) acc += ldf(dout + (si * b + bi) * h + c);
        dtable[(first + si) * h + c] += acc;
    }
}

void check_ce(std::int64_t rows, std::int64_t v, const char* op) {
    GPT_REQUIRE(rows >= 0 && v > 0, UsageError, op, ": bad shape ", rows, "x", v);
}

}  // namespace

void CudaBackend::layernorm_forward(const void* x, const void* gamma, const void* beta, void* y,
                                    float* mean, float* rstd, std::int64_t rows,
                                    std::int64_t cols, float eps, DType dtype) {
    GPT_REQUIRE(rows >= 0 && cols > 0, UsageError, "layernorm_forward: bad shape ", rows, "x", cols);
    if (rows == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        if (vectorizable<T>(cols, {x, gamma, beta, y}) &&
            with_row_packs<T>(cols, [&](auto k) {
                constexpr int K = decltype(k)::value;
                ln_fwd_vec_kernel<T, K><<<row_grid(rows), row_threads(cols / kVec<T>, K), 0, kStream>>>(
                    static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(beta),
                    static_cast<T*>(y), mean, rstd, rows, static_cast<int>(cols), eps);
            }))
            return;
        ln_fwd_kernel<T><<<row_grid(rows), kThreads, 0, kStream>>>(
            static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(beta),
            static_cast<T*>(y), mean, rstd, rows, cols, eps);
    });
    GPT_CUDA_LAUNCH_CHECK("layernorm_forward");
}

void CudaBackend::layernorm_backward(const void* dy, const void* x, const void* gamma,
                                     const float* mean, const float* rstd, const void* dresidual,
                                     void* dx, float* dgamma, float* dbeta, std::int64_t rows,
                                     std::int64_t cols, DType dtype) {
    GPT_REQUIRE(rows >= 0 && cols > 0, UsageError, "layernorm_backward: bad shape ", rows, "x", cols);
    if (rows == 0) return;
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
                             ln_bwd_vec_kernel<T, K><<<static_cast<unsigned>(chunks), row_threads(cols / kVec<T>, K), 0, kStream>>>(
                                 static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(gamma),
                                 mean, rstd, static_cast<const T*>(dresidual), static_cast<T*>(dx), pg, pb, rows,
                                 static_cast<int>(cols), rpc);
                         });
        if (vec) return;
        // Parameter gradients first: they read dy, which dx may overwrite.
        const dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads), static_cast<unsigned>(chunks));
        ln_param_partials_kernel<T><<<grid, kThreads, 0, kStream>>>(
            static_cast<const T*>(dy), static_cast<const T*>(x), mean, rstd, pg, pb, rows, cols, rpc);
        ln_dx_kernel<T><<<row_grid(rows), kThreads, 0, kStream>>>(
            static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(gamma), mean,
            rstd, static_cast<const T*>(dresidual), static_cast<T*>(dx), rows, cols);
    });
    GPT_CUDA_LAUNCH_CHECK("layernorm_backward");
    add_chunk_sums(pg, dgamma, chunks, cols);
    add_chunk_sums(pb, dbeta, chunks, cols);
}

void CudaBackend::cross_entropy_max(const void* logits, float* row_max, std::int64_t rows,
                                    std::int64_t v, DType dtype) {
    check_ce(rows, v, "cross_entropy_max");
    if (rows == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        ce_max_kernel<T><<<row_grid(rows), kThreads, 0, kStream>>>(static_cast<const T*>(logits),
                                                                   row_max, rows, v);
    });
    GPT_CUDA_LAUNCH_CHECK("cross_entropy_max");
}

void CudaBackend::cross_entropy_sums(const void* logits, const std::int32_t* targets,
                                     const float* row_max, float* sum_exp, float* target_logit,
                                     std::int64_t rows, std::int64_t v, std::int64_t vocab_start,
                                     DType dtype) {
    check_ce(rows, v, "cross_entropy_sums");
    if (rows == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        ce_sums_kernel<T><<<row_grid(rows), kThreads, 0, kStream>>>(
            static_cast<const T*>(logits), targets, row_max, sum_exp, target_logit, rows, v, vocab_start);
    });
    GPT_CUDA_LAUNCH_CHECK("cross_entropy_sums");
}

void CudaBackend::cross_entropy_stats(const void* logits, const std::int32_t* targets,
                                      float* local_max, float* sum_exp, float* target_logit,
                                      std::int64_t rows, std::int64_t v, std::int64_t vocab_start,
                                      DType dtype) {
    check_ce(rows, v, "cross_entropy_stats");
    if (rows == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        auto launch = [&](auto kernel) {
            kernel<<<row_grid(rows), kThreads, 0, kStream>>>(static_cast<const T*>(logits), targets, local_max,
                                                             sum_exp, target_logit, rows, v, vocab_start);
        };
        if (vectorizable<T>(v, {logits}))
            launch(ce_stats_kernel<T, true>);
        else
            launch(ce_stats_kernel<T, false>);
    });
    GPT_CUDA_LAUNCH_CHECK("cross_entropy_stats");
}

void CudaBackend::cross_entropy_loss(const float* row_max, const float* sum_exp,
                                     const float* target_logit, float* loss, std::int64_t rows) {
    GPT_REQUIRE(rows >= 0, UsageError, "cross_entropy_loss: negative rows");
    if (rows == 0) return;
    ce_loss_kernel<<<grid_for(rows), kThreads, 0, kStream>>>(row_max, sum_exp, target_logit, loss, rows);
    GPT_CUDA_LAUNCH_CHECK("cross_entropy_loss");
}

void CudaBackend::cross_entropy_backward(const void* logits, const std::int32_t* targets,
                                         const float* row_max, const float* sum_exp,
                                         const float* dloss, void* dlogits, std::int64_t rows,
                                         std::int64_t v, std::int64_t vocab_start, DType dtype) {
    check_ce(rows, v, "cross_entropy_backward");
    if (rows == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        auto launch = [&](auto kernel) {
            kernel<<<row_grid(rows), kThreads, 0, kStream>>>(static_cast<const T*>(logits), targets, row_max,
                                                             sum_exp, dloss, static_cast<T*>(dlogits), rows,
                                                             v, vocab_start);
        };
        if (vectorizable<T>(v, {logits, dlogits}))
            launch(ce_bwd_kernel<T, true>);
        else
            launch(ce_bwd_kernel<T, false>);
    });
    GPT_CUDA_LAUNCH_CHECK("cross_entropy_backward");
}

void CudaBackend::embedding_forward(const std::int32_t* tokens, const void* table, void* out,
                                    std::int64_t b, std::int64_t s, std::int64_t h,
                                    std::int64_t vocab_start, std::int64_t vocab_end, DType dtype) {
    GPT_REQUIRE(b >= 0 && s >= 0 && h > 0 && vocab_end >= vocab_start, UsageError,
                "embedding_forward: bad shape");
    if (b * s == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        emb_fwd_kernel<T><<<row_grid(b * s), kThreads, 0, kStream>>>(
            tokens, static_cast<const T*>(table), static_cast<T*>(out), b, s, h, vocab_start, vocab_end);
    });
    GPT_CUDA_LAUNCH_CHECK("embedding_forward");
}

void CudaBackend::embedding_backward(const std::int32_t* tokens, const void* dout, float* dtable,
                                     std::int64_t b, std::int64_t s, std::int64_t h,
                                     std::int64_t vocab_start, std::int64_t vocab_end, DType dtype) {
    GPT_REQUIRE(b >= 0 && s >= 0 && h > 0 && vocab_end >= vocab_start, UsageError,
                "embedding_backward: bad shape");
    if (b * s == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        emb_bwd_kernel<T><<<row_grid(b * s), kThreads, 0, kStream>>>(
            tokens, static_cast<const T*>(dout), dtable, b, s, h, vocab_start, vocab_end);
    });
    GPT_CUDA_LAUNCH_CHECK("embedding_backward");
}

void CudaBackend::position_embedding_forward(const void* table, void* out, std::int64_t b,
                                             std::int64_t s, std::int64_t h,
                                             std::int64_t first_position, DType dtype) {
    GPT_REQUIRE(b >= 0 && s >= 0 && h > 0 && first_position >= 0, UsageError,
                "position_embedding_forward: bad shape");
    if (b * s == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        pos_fwd_kernel<T><<<row_grid(b * s), kThreads, 0, kStream>>>(
            static_cast<const T*>(table), static_cast<T*>(out), b, s, h, first_position);
    });
    GPT_CUDA_LAUNCH_CHECK("position_embedding_forward");
}

void CudaBackend::position_embedding_backward(const void* dout, float* dtable, std::int64_t b,
                                              std::int64_t s, std::int64_t h,
                                              std::int64_t first_position, DType dtype) {
    GPT_REQUIRE(b >= 0 && s >= 0 && h > 0 && first_position >= 0, UsageError,
                "position_embedding_backward: bad shape");
    if (b * s == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        pos_bwd_kernel<T><<<grid_for(s * h), kThreads, 0, kStream>>>(
            static_cast<const T*>(dout), dtable, b, s, h, first_position);
    });
    GPT_CUDA_LAUNCH_CHECK("position_embedding_backward");
}

}  // namespace gpt::cuda
