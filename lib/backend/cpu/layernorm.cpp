// LayerNorm over the last dim: fp32 statistics (two-pass variance), fp32 mean/rstd saved.
#include <cmath>
#include <vector>

#include "backend/cpu/common.hpp"
#include "backend/cpu/cpu_backend.hpp"

namespace gpt::cpu {

void CpuBackend::do_layernorm_forward(const void* x, const void* gamma, const void* beta, void* y,
                                      float* mean, float* rstd, std::int64_t rows,
                                      std::int64_t cols, float eps, DType dtype, bool zero_centered_gamma,
                                      const NormRows& at) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        const std::vector<float> g32 = norm_scale<T>(gamma, cols, zero_centered_gamma);
        std::vector<float> b32(cols);
        convert(static_cast<const T*>(beta), b32.data(), cols);
        const float* g = g32.data();
        const float* bb = b32.data();
#pragma omp parallel if (rows * cols >= kParallelMin)
        {
            std::vector<float> xbuf(cols), ybuf(cols);
#pragma omp for schedule(static)
            for (std::int64_t r = 0; r < rows; ++r) {
                const float* xr = load<T>(x, at.at(r) * cols, cols, xbuf.data());
                float* yr = out_ptr<T>(y, at.at(r) * cols, ybuf.data());
                float s = 0.0f;
#pragma omp simd reduction(+ : s)
                for (std::int64_t i = 0; i < cols; ++i) s += xr[i];
                const float mu = s / static_cast<float>(cols);
                float v = 0.0f;
#pragma omp simd reduction(+ : v)
                for (std::int64_t i = 0; i < cols; ++i) v += (xr[i] - mu) * (xr[i] - mu);
                const float rs = 1.0f / std::sqrt(v / static_cast<float>(cols) + eps);
#pragma omp simd
                for (std::int64_t i = 0; i < cols; ++i) yr[i] = (xr[i] - mu) * rs * g[i] + bb[i];
                store<T>(ybuf.data(), y, at.at(r) * cols, cols);
                mean[r] = mu;
                rstd[r] = rs;
            }
        }
    });
}

void CpuBackend::do_layernorm_backward(const void* dy, const void* x, const void* gamma,
                                       const float* mean, const float* rstd, const void* dresidual,
                                       void* dx, float* dgamma, float* dbeta, std::int64_t rows,
                                       std::int64_t cols, DType dtype, bool zero_centered_gamma, const NormRows& at) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        const std::vector<float> g32 = norm_scale<T>(gamma, cols, zero_centered_gamma);
        const float* g = g32.data();
        const int nthreads = rows * cols >= kParallelMin ? max_threads() : 1;
        // Per-thread partial parameter gradients, added in thread order at the end.
        std::vector<float> partial(static_cast<std::size_t>(nthreads) * 2 * cols, 0.0f);
#pragma omp parallel num_threads(nthreads)
        {
            const int t = omp_get_thread_num();
            float* pg = partial.data() + static_cast<std::size_t>(t) * 2 * cols;
            float* pb = pg + cols;
            std::vector<float> dybuf(cols), xbuf(cols), dxbuf(cols), xhat(cols), dyg(cols),
                resbuf(dresidual ? cols : 0);
#pragma omp for schedule(static)
            for (std::int64_t r = 0; r < rows; ++r) {
                const float* dyr = load<T>(dy, at.at(r) * cols, cols, dybuf.data());
                const float* xr = load<T>(x, at.at(r) * cols, cols, xbuf.data());
                const float mu = mean[r], rs = rstd[r];
                float c1 = 0.0f, c2 = 0.0f;
#pragma omp simd reduction(+ : c1, c2)
                for (std::int64_t i = 0; i < cols; ++i) {
                    xhat[i] = (xr[i] - mu) * rs;
                    dyg[i] = dyr[i] * g[i];
                    c1 += dyg[i];
                    c2 += dyg[i] * xhat[i];
                    pg[i] += dyr[i] * xhat[i];
                    pb[i] += dyr[i];
                }
                c1 /= static_cast<float>(cols);
                c2 /= static_cast<float>(cols);
                // dx must be written after dy, x and dresidual are read (dx may alias them).
                float* dxr = out_ptr<T>(dx, at.at(r) * cols, dxbuf.data());
                if (dresidual) {
                    const float* rr = load<T>(dresidual, at.at(r) * cols, cols, resbuf.data());
#pragma omp simd
                    for (std::int64_t i = 0; i < cols; ++i)
                        dxr[i] = rr[i] + (dyg[i] - c1 - xhat[i] * c2) * rs;
                } else {
#pragma omp simd
                    for (std::int64_t i = 0; i < cols; ++i) dxr[i] = (dyg[i] - c1 - xhat[i] * c2) * rs;
                }
                store<T>(dxbuf.data(), dx, at.at(r) * cols, cols);
            }
        }
        for (int t = 0; t < nthreads; ++t) {
            const float* pg = partial.data() + static_cast<std::size_t>(t) * 2 * cols;
            const float* pb = pg + cols;
            for (std::int64_t i = 0; i < cols; ++i) {
                dgamma[i] += pg[i];
                dbeta[i] += pb[i];
            }
        }
    });
}

}  // namespace gpt::cpu
