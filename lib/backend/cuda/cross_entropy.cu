// The vocab-parallel cross-entropy pieces (max, sums, online-softmax stats, loss, backward):
// a block per row, statistics in fp32.
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/vec_access.cuh"

namespace gpt::cuda {

namespace {

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

}  // namespace

void CudaBackend::do_cross_entropy_max(const void* logits, float* row_max, std::int64_t rows,
                                       std::int64_t v, DType dtype) {
    if (rows == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        ce_max_kernel<T><<<row_grid(rows), kThreads, 0, cuda_stream(stream())>>>(static_cast<const T*>(logits),
                                                                   row_max, rows, v);
    });
    GPT_CUDA_LAUNCH_CHECK("cross_entropy_max");
}

void CudaBackend::do_cross_entropy_sums(const void* logits, const std::int32_t* targets,
                                        const float* row_max, float* sum_exp, float* target_logit,
                                        std::int64_t rows, std::int64_t v, std::int64_t vocab_start,
                                        DType dtype) {
    if (rows == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        ce_sums_kernel<T><<<row_grid(rows), kThreads, 0, cuda_stream(stream())>>>(
            static_cast<const T*>(logits), targets, row_max, sum_exp, target_logit, rows, v, vocab_start);
    });
    GPT_CUDA_LAUNCH_CHECK("cross_entropy_sums");
}

void CudaBackend::do_cross_entropy_stats(const void* logits, const std::int32_t* targets,
                                         float* local_max, float* sum_exp, float* target_logit,
                                         std::int64_t rows, std::int64_t v, std::int64_t vocab_start,
                                         DType dtype) {
    if (rows == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        auto launch = [&](auto kernel) {
            kernel<<<row_grid(rows), kThreads, 0, cuda_stream(stream())>>>(static_cast<const T*>(logits), targets, local_max,
                                                             sum_exp, target_logit, rows, v, vocab_start);
        };
        if (vectorizable<T>(v, {logits}))
            launch(ce_stats_kernel<T, true>);
        else
            launch(ce_stats_kernel<T, false>);
    });
    GPT_CUDA_LAUNCH_CHECK("cross_entropy_stats");
}

void CudaBackend::do_cross_entropy_loss(const float* row_max, const float* sum_exp,
                                        const float* target_logit, float* loss, std::int64_t rows) {
    if (rows == 0) return;
    ce_loss_kernel<<<grid_for(rows), kThreads, 0, cuda_stream(stream())>>>(row_max, sum_exp, target_logit, loss, rows);
    GPT_CUDA_LAUNCH_CHECK("cross_entropy_loss");
}

void CudaBackend::do_cross_entropy_backward(const void* logits, const std::int32_t* targets,
                                            const float* row_max, const float* sum_exp,
                                            const float* dloss, void* dlogits, std::int64_t rows,
                                            std::int64_t v, std::int64_t vocab_start, DType dtype) {
    if (rows == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        auto launch = [&](auto kernel) {
            kernel<<<row_grid(rows), kThreads, 0, cuda_stream(stream())>>>(static_cast<const T*>(logits), targets, row_max,
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

}  // namespace gpt::cuda
