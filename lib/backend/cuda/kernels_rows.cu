// Row-wise ops: layernorm, the vocab-parallel cross-entropy pieces, and embeddings.
// One block per row where a row is reduced; statistics and accumulation in fp32.
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_common.cuh"

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

__global__ void ln_param_finish_kernel(const float* pg, const float* pb, float* dgamma,
                                       float* dbeta, std::int64_t chunks, std::int64_t cols) {
    GPT_GRID_STRIDE(col, cols) {
        float ag = 0.0f, ab = 0.0f;
        for (std::int64_t c = 0; c < chunks; ++c) {
            ag += pg[c * cols + col];
            ab += pb[c * cols + col];
        }
        dgamma[col] += ag;
        dbeta[col] += ab;
    }
}

template <typename T>
__global__ void ln_dx_kernel(const T* dy, const T* x, const T* gamma, const float* mean,
                             const float* rstd, T* dx, std::int64_t rows, std::int64_t cols) {
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
        // Each element is read and then written by the same thread: dx may alias dy.
        for (std::int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
            const float dyg = ldf(dy + r * cols + i) * ldf(gamma + i);
            const float xhat = (ldf(x + r * cols + i) - mu) * rs;
            stf(dx + r * cols + i, (dyg - c1 - xhat * c2) * rs);
        }
        __syncthreads();
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
template <typename T>
__global__ void ce_stats_kernel(const T* logits, const std::int32_t* targets, float* local_max,
                                float* sum_exp, float* target_logit, std::int64_t rows,
                                std::int64_t v, std::int64_t vocab_start) {
    __shared__ float sh[32];
    GPT_ROW_LOOP(r, rows) {
        float m = -INFINITY, s = 0.0f;
        for (std::int64_t i = threadIdx.x; i < v; i += blockDim.x) {
            const float l = ldf(logits + r * v + i);
            if (l > m) {
                s = s * expf(m - l) + 1.0f;  // expf(-inf) = 0 on the first element
                m = l;
            } else {
                s += expf(l - m);  // NaN logits propagate into the sum, as on the CPU
            }
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
template <typename T>
__global__ void ce_bwd_kernel(const T* logits, const std::int32_t* targets, const float* row_max,
                              const float* sum_exp, const float* dloss, T* dlogits,
                              std::int64_t rows, std::int64_t v, std::int64_t vocab_start) {
    GPT_ROW_LOOP(r, rows) {
        const float m = row_max[r], scale = dloss[r] / sum_exp[r];
        const std::int64_t t = static_cast<std::int64_t>(targets[r]) - vocab_start;
        const T* in = logits + r * v;
        T* out = dlogits + r * v;
        for (std::int64_t j = threadIdx.x; j < v; j += blockDim.x) {
            float d = expf(ldf(in + j) - m) * scale;
            if (j == t) d -= dloss[r];
            stf(out + j, d);
        }
    }
}

// ---- embeddings ----------------------------------------------------------------------------

// out [s, b, h]: token (si, bi) is row t = si*b + bi; tokens are [b, s].
template <typename T>
__global__ void emb_fwd_kernel(const std::int32_t* tokens, const T* table, T* out, std::int64_t b,
                               std::int64_t s, std::int64_t h, std::int64_t vs, std::int64_t ve) {
    GPT_GRID_STRIDE(i, s * b * h) {
        const std::int64_t t = i / h, c = i % h;
        const std::int64_t id = tokens[(t % b) * s + t / b];
        if (id >= vs && id < ve)
            out[i] = table[(id - vs) * h + c];
        else
            stf(out + i, 0.0f);
    }
}

// Repeated tokens add into one table row: fp32 atomics (summation order, hence the last
// bits, may differ between runs; the CPU backend is the deterministic reference).
template <typename T>
__global__ void emb_bwd_kernel(const std::int32_t* tokens, const T* dout, float* dtable,
                               std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t vs,
                               std::int64_t ve) {
    GPT_GRID_STRIDE(i, s * b * h) {
        const std::int64_t t = i / h, c = i % h;
        const std::int64_t id = tokens[(t % b) * s + t / b];
        if (id >= vs && id < ve) atomicAdd(dtable + (id - vs) * h + c, ldf(dout + i));
    }
}

template <typename T>
__global__ void pos_fwd_kernel(const T* table, T* out, std::int64_t b, std::int64_t s,
                               std::int64_t h, std::int64_t first) {
    GPT_GRID_STRIDE(i, s * b * h) {
        const std::int64_t t = i / h, c = i % h;
        stf(out + i, ldf(out + i) + ldf(table + (first + t / b) * h + c));
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
        ln_fwd_kernel<T><<<row_grid(rows), kThreads, 0, kStream>>>(
            static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(beta),
            static_cast<T*>(y), mean, rstd, rows, cols, eps);
    });
    GPT_CUDA_LAUNCH_CHECK("layernorm_forward");
}

void CudaBackend::layernorm_backward(const void* dy, const void* x, const void* gamma,
                                     const float* mean, const float* rstd, void* dx,
                                     float* dgamma, float* dbeta, std::int64_t rows,
                                     std::int64_t cols, DType dtype) {
    GPT_REQUIRE(rows >= 0 && cols > 0, UsageError, "layernorm_backward: bad shape ", rows, "x", cols);
    if (rows == 0) return;
    const std::int64_t rpc = std::max<std::int64_t>(32, (rows + 255) / 256);
    const std::int64_t chunks = (rows + rpc - 1) / rpc;
    Scratch partial(*this, static_cast<std::size_t>(2 * chunks * cols) * sizeof(float));
    float* pg = partial.as<float>();
    float* pb = pg + chunks * cols;
    const dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads), static_cast<unsigned>(chunks));
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        // Parameter gradients first: they read dy, which dx may overwrite.
        ln_param_partials_kernel<T><<<grid, kThreads, 0, kStream>>>(
            static_cast<const T*>(dy), static_cast<const T*>(x), mean, rstd, pg, pb, rows, cols, rpc);
        ln_param_finish_kernel<<<grid_for(cols), kThreads, 0, kStream>>>(pg, pb, dgamma, dbeta, chunks, cols);
        ln_dx_kernel<T><<<row_grid(rows), kThreads, 0, kStream>>>(
            static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(gamma), mean,
            rstd, static_cast<T*>(dx), rows, cols);
    });
    GPT_CUDA_LAUNCH_CHECK("layernorm_backward");
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
        ce_stats_kernel<T><<<row_grid(rows), kThreads, 0, kStream>>>(
            static_cast<const T*>(logits), targets, local_max, sum_exp, target_logit, rows, v, vocab_start);
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
        ce_bwd_kernel<T><<<row_grid(rows), kThreads, 0, kStream>>>(
            static_cast<const T*>(logits), targets, row_max, sum_exp, dloss,
            static_cast<T*>(dlogits), rows, v, vocab_start);
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
        emb_fwd_kernel<T><<<grid_for(b * s * h), kThreads, 0, kStream>>>(
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
        emb_bwd_kernel<T><<<grid_for(b * s * h), kThreads, 0, kStream>>>(
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
        pos_fwd_kernel<T><<<grid_for(b * s * h), kThreads, 0, kStream>>>(
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
