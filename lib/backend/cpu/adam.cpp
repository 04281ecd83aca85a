// AdamW (decoupled weight decay, bias-corrected; torch.optim.AdamW / apex FusedAdam
// adam_w_mode), gradient statistics for clipping and overflow checks, and sums.
#include <cmath>

#include "backend/cpu/common.hpp"
#include "backend/cpu/cpu_backend.hpp"

namespace gpt::cpu {

void CpuBackend::do_adam_step(const AdamArgs& a) {
    const float b1 = a.beta1, b2 = a.beta2, eps = a.eps, gs = a.grad_scale;
    // Bias corrections in double: beta^step for large steps loses digits in fp32.
    const double bc1 = 1.0 - std::pow(static_cast<double>(b1), static_cast<double>(a.step));
    const double bc2 = 1.0 - std::pow(static_cast<double>(b2), static_cast<double>(a.step));
    const float step_size = static_cast<float>(a.lr / bc1);
    const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
    const float decay = 1.0f - a.lr * a.weight_decay;
    float* p = a.main_param;
    const float* g = a.grad;
    float* m = a.exp_avg;
    float* v = a.exp_avg_sq;
    auto update = [&](std::int64_t i0, std::int64_t len) {
#pragma omp simd
        for (std::int64_t i = i0; i < i0 + len; ++i) {
            const float gi = g[i] * gs;
            const float mi = b1 * m[i] + (1.0f - b1) * gi;
            const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
            m[i] = mi;
            v[i] = vi;
            const float denom = std::sqrt(vi) * inv_sqrt_bc2 + eps;
            p[i] = p[i] * decay - step_size * mi / denom;
        }
    };
    if (a.model_param == nullptr || a.model_dtype == DType::F32) {
        float* mp = static_cast<float*>(a.model_param);
        for_chunks(a.n, [&](std::int64_t i0, std::int64_t len) {
            update(i0, len);
            if (mp && mp != p) std::copy(p + i0, p + i0 + len, mp + i0);
        });
        return;
    }
    dispatch(a.model_dtype, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (!std::is_same_v<T, float>) {
            T* mp = static_cast<T*>(a.model_param);
            for_chunks(a.n, [&](std::int64_t i0, std::int64_t len) {
                update(i0, len);
                convert(p + i0, mp + i0, static_cast<std::size_t>(len));
            });
        }
    });
}

GradStats CpuBackend::do_grad_stats(const float* g, std::int64_t n) {
    const std::int64_t nchunks = (n + kChunk - 1) / kChunk;
    double total = 0.0;
    bool finite = true;
    std::int64_t zeros = 0;
#pragma omp parallel for schedule(static) reduction(+ : total, zeros) reduction(&& : finite) \
    if (n >= kParallelMin)
    for (std::int64_t c = 0; c < nchunks; ++c) {
        const std::int64_t i0 = c * kChunk, len = std::min(kChunk, n - i0);
        // Squares in double: loss-scaled gradients near fp32's range would overflow as
        // squares in fp32 and report a finite gradient as an infinite norm.
        double s = 0.0;
        float bad = 0.0f;
        std::int64_t z = 0;
#pragma omp simd reduction(+ : s, bad, z)
        for (std::int64_t i = i0; i < i0 + len; ++i) {
            const double gi = g[i];
            s += gi * gi;
            bad += g[i] - g[i];  // 0 for finite values, NaN for Inf and NaN
            z += g[i] == 0.0f ? 1 : 0;
        }
        total += s;
        zeros += z;
        finite = finite && (bad == 0.0f);
    }
    return GradStats{total, finite, zeros};
}

double CpuBackend::do_sum(const float* x, std::int64_t n) {
    double total = 0.0;
    for (std::int64_t i = 0; i < n; ++i) total += x[i];
    return total;
}

}  // namespace gpt::cpu
