// Cross-entropy from per-shard pieces: max, sum of exp given the global max, the target
// logit, then loss and gradient. A vocab-parallel caller reduces max (MAX) and sum_exp,
// target_logit (SUM) between the calls; with one shard the same calls are the whole loss.
// cross_entropy_stats is the one-pass form (local max + sum relative to it).
#if defined(__AVX__)
#include <immintrin.h>
#endif

#include <cmath>
#include <limits>

#include "backend/cpu/common.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/vmath.hpp"

namespace gpt::cpu {

namespace {
// Max of l[0..n) with explicit vector maxima where available (GCC does not vectorise a max
// reduction over floats without -ffast-math). NaN logits reach the loss through the exps.
inline float chunk_max(const float* l, std::int64_t n) {
    float m = -std::numeric_limits<float>::infinity();
    std::int64_t i = 0;
#if defined(__AVX__)
    __m256 v = _mm256_set1_ps(m);
    for (; i + 8 <= n; i += 8) v = _mm256_max_ps(v, _mm256_loadu_ps(l + i));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, v);
    for (float x : lanes) m = x > m ? x : m;
#endif
    for (; i < n; ++i) m = l[i] > m ? l[i] : m;
    return m;
}
}  // namespace

void CpuBackend::do_cross_entropy_max(const void* logits, float* row_max, std::int64_t rows,
                                      std::int64_t v, DType dtype) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
#pragma omp parallel for schedule(static) if (rows * v >= kParallelMin)
        for (std::int64_t r = 0; r < rows; ++r) {
            float m = -std::numeric_limits<float>::infinity();
            float buf[kChunk];
            for (std::int64_t c0 = 0; c0 < v; c0 += kChunk) {
                const std::int64_t len = std::min(kChunk, v - c0);
                m = std::max(m, chunk_max(load<T>(logits, r * v + c0, len, buf), len));
            }
            row_max[r] = m;
        }
    });
}

void CpuBackend::do_cross_entropy_sums(const void* logits, const std::int32_t* targets,
                                       const float* row_max, float* sum_exp, float* target_logit,
                                       std::int64_t rows, std::int64_t v, std::int64_t vocab_start,
                                       DType dtype) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
#pragma omp parallel for schedule(static) if (rows * v >= kParallelMin)
        for (std::int64_t r = 0; r < rows; ++r) {
            const float m = row_max[r];
            float s = 0.0f;
            float buf[kChunk];
            for (std::int64_t c0 = 0; c0 < v; c0 += kChunk) {
                const std::int64_t len = std::min(kChunk, v - c0);
                const float* l = load<T>(logits, r * v + c0, len, buf);
#pragma omp simd reduction(+ : s)
                for (std::int64_t i = 0; i < len; ++i) s += fast_exp(l[i] - m);
            }
            sum_exp[r] = s;
            const std::int64_t t = static_cast<std::int64_t>(targets[r]) - vocab_start;
            target_logit[r] =
                (t >= 0 && t < v) ? to_float(static_cast<const T*>(logits)[r * v + t]) : 0.0f;
        }
    });
}

void CpuBackend::do_cross_entropy_stats(const void* logits, const std::int32_t* targets,
                                        float* local_max, float* sum_exp, float* target_logit,
                                        std::int64_t rows, std::int64_t v, std::int64_t vocab_start,
                                        DType dtype) {
    // One read of the logits from memory: each chunk (in L1) gives its max, the running sum
    // is rescaled to the new max, then the chunk's exps are added.
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
#pragma omp parallel for schedule(static) if (rows * v >= kParallelMin)
        for (std::int64_t r = 0; r < rows; ++r) {
            float m = -std::numeric_limits<float>::infinity();
            float s = 0.0f;
            float buf[kChunk];
            for (std::int64_t c0 = 0; c0 < v; c0 += kChunk) {
                const std::int64_t len = std::min(kChunk, v - c0);
                const float* l = load<T>(logits, r * v + c0, len, buf);
                const float cm = std::max(m, chunk_max(l, len));
                float cs = 0.0f;
#pragma omp simd reduction(+ : cs)
                for (std::int64_t i = 0; i < len; ++i) cs += fast_exp(l[i] - cm);
                s = s * fast_exp(m - cm) + cs;  // exp(-inf) = 0 on the first chunk
                m = cm;
            }
            local_max[r] = m;
            sum_exp[r] = s;
            const std::int64_t t = static_cast<std::int64_t>(targets[r]) - vocab_start;
            target_logit[r] =
                (t >= 0 && t < v) ? to_float(static_cast<const T*>(logits)[r * v + t]) : 0.0f;
        }
    });
}

void CpuBackend::do_cross_entropy_loss(const float* row_max, const float* sum_exp,
                                       const float* target_logit, float* loss, std::int64_t rows) {
    for (std::int64_t r = 0; r < rows; ++r)
        loss[r] = std::log(sum_exp[r]) + row_max[r] - target_logit[r];
}

void CpuBackend::do_cross_entropy_backward(const void* logits, const std::int32_t* targets,
                                           const float* row_max, const float* sum_exp,
                                           const float* dloss, void* dlogits, std::int64_t rows,
                                           std::int64_t v, std::int64_t vocab_start,
                                           DType dtype) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
#pragma omp parallel for schedule(static) if (rows * v >= kParallelMin)
        for (std::int64_t r = 0; r < rows; ++r) {
            const float m = row_max[r];
            const float scale = dloss[r] / sum_exp[r];
            const std::int64_t t = static_cast<std::int64_t>(targets[r]) - vocab_start;
            float bl[kChunk], bd[kChunk];
            for (std::int64_t c0 = 0; c0 < v; c0 += kChunk) {
                const std::int64_t len = std::min(kChunk, v - c0);
                const float* l = load<T>(logits, r * v + c0, len, bl);
                float* d = out_ptr<T>(dlogits, r * v + c0, bd);
#pragma omp simd
                for (std::int64_t i = 0; i < len; ++i) d[i] = fast_exp(l[i] - m) * scale;
                if (t >= c0 && t < c0 + len) d[t - c0] -= dloss[r];
                store<T>(bd, dlogits, r * v + c0, len);
            }
        }
    });
}

}  // namespace gpt::cpu
