// Cross-entropy from per-shard pieces: max, sum of exp given the global max, the target
// logit, then loss and gradient. A vocab-parallel caller reduces max (MAX) and sum_exp,
// target_logit (SUM) between the calls; with one shard the same calls are the whole loss.
#include <cmath>
#include <limits>

#include "backend/cpu/common.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/vmath.hpp"

namespace gpt::cpu {

namespace {
void check_shape(std::int64_t rows, std::int64_t v, const char* op) {
    GPT_REQUIRE(rows >= 0 && v > 0, UsageError, op, ": bad shape ", rows, "x", v);
}
}  // namespace

void CpuBackend::cross_entropy_max(const void* logits, float* row_max, std::int64_t rows,
                                   std::int64_t v, DType dtype) {
    check_shape(rows, v, "cross_entropy_max");
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
#pragma omp parallel for schedule(static) if (rows * v >= kParallelMin)
        for (std::int64_t r = 0; r < rows; ++r) {
            float m = -std::numeric_limits<float>::infinity();
            float buf[kChunk];
            for (std::int64_t c0 = 0; c0 < v; c0 += kChunk) {
                const std::int64_t len = std::min(kChunk, v - c0);
                const float* l = load<T>(logits, r * v + c0, len, buf);
#pragma omp simd reduction(max : m)
                for (std::int64_t i = 0; i < len; ++i) m = std::max(m, l[i]);
            }
            row_max[r] = m;
        }
    });
}

void CpuBackend::cross_entropy_sums(const void* logits, const std::int32_t* targets,
                                    const float* row_max, float* sum_exp, float* target_logit,
                                    std::int64_t rows, std::int64_t v, std::int64_t vocab_start,
                                    DType dtype) {
    check_shape(rows, v, "cross_entropy_sums");
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

void CpuBackend::cross_entropy_loss(const float* row_max, const float* sum_exp,
                                    const float* target_logit, float* loss, std::int64_t rows) {
    GPT_REQUIRE(rows >= 0, UsageError, "cross_entropy_loss: negative rows");
    for (std::int64_t r = 0; r < rows; ++r)
        loss[r] = std::log(sum_exp[r]) + row_max[r] - target_logit[r];
}

void CpuBackend::cross_entropy_backward(const void* logits, const std::int32_t* targets,
                                        const float* row_max, const float* sum_exp,
                                        const float* dloss, void* dlogits, std::int64_t rows,
                                        std::int64_t v, std::int64_t vocab_start,
                                        DType dtype) {
    check_shape(rows, v, "cross_entropy_backward");
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
