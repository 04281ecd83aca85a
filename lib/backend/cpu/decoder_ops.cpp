// RMSNorm, SwiGLU and the grouped-QKV expansion with rotary embeddings (Llama-style layers).
#include <cmath>
#include <vector>

#include "backend/cpu/common.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/decoder_ops_common.hpp"

namespace gpt::cpu {

void CpuBackend::do_rmsnorm_forward(const void* x, const void* gamma, void* y, float* rstd,
                                    std::int64_t rows, std::int64_t cols, float eps, DType dtype,
                                    bool zero_centered_gamma, const NormRows& at) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        const std::vector<float> g32 = norm_scale<T>(gamma, cols, zero_centered_gamma);
        const float* g = g32.data();
#pragma omp parallel if (rows * cols >= kParallelMin)
        {
            std::vector<float> xbuf(cols), ybuf(cols);
#pragma omp for schedule(static)
            for (std::int64_t r = 0; r < rows; ++r) {
                const float* xr = load<T>(x, at.at(r) * cols, cols, xbuf.data());
                float* yr = out_ptr<T>(y, at.at(r) * cols, ybuf.data());
                float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
                for (std::int64_t i = 0; i < cols; ++i) ss += xr[i] * xr[i];
                const float rs = 1.0f / std::sqrt(ss / static_cast<float>(cols) + eps);
#pragma omp simd
                for (std::int64_t i = 0; i < cols; ++i) yr[i] = xr[i] * rs * g[i];
                store<T>(ybuf.data(), y, at.at(r) * cols, cols);
                rstd[r] = rs;
            }
        }
    });
}

void CpuBackend::do_rmsnorm_backward(const void* dy, const void* x, const void* gamma,
                                     const float* rstd, const void* dresidual, void* dx,
                                     float* dgamma, std::int64_t rows, std::int64_t cols,
                                     DType dtype, bool zero_centered_gamma, const NormRows& at) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        const std::vector<float> g32 = norm_scale<T>(gamma, cols, zero_centered_gamma);
        const float* g = g32.data();
        const int nthreads = rows * cols >= kParallelMin ? max_threads() : 1;
        // Per-thread partial weight gradients, added in thread order at the end.
        std::vector<float> partial(static_cast<std::size_t>(nthreads) * cols, 0.0f);
#pragma omp parallel num_threads(nthreads)
        {
            float* pg = partial.data() + static_cast<std::size_t>(omp_get_thread_num()) * cols;
            std::vector<float> dybuf(cols), xbuf(cols), dxbuf(cols), xhat(cols), dyg(cols),
                resbuf(dresidual ? cols : 0);
#pragma omp for schedule(static)
            for (std::int64_t r = 0; r < rows; ++r) {
                const float* dyr = load<T>(dy, at.at(r) * cols, cols, dybuf.data());
                const float* xr = load<T>(x, at.at(r) * cols, cols, xbuf.data());
                const float rs = rstd[r];
                // y = xhat * g with xhat = x * rstd: dx = rstd * (dy g - xhat mean(dy g xhat)).
                float c = 0.0f;
#pragma omp simd reduction(+ : c)
                for (std::int64_t i = 0; i < cols; ++i) {
                    xhat[i] = xr[i] * rs;
                    dyg[i] = dyr[i] * g[i];
                    c += dyg[i] * xhat[i];
                    pg[i] += dyr[i] * xhat[i];
                }
                c /= static_cast<float>(cols);
                // dx must be written after dy, x and dresidual are read (dx may alias them).
                const float* rr = dresidual ? load<T>(dresidual, at.at(r) * cols, cols, resbuf.data()) : nullptr;
                float* dxr = out_ptr<T>(dx, at.at(r) * cols, dxbuf.data());
#pragma omp simd
                for (std::int64_t i = 0; i < cols; ++i)
                    dxr[i] = (rr ? rr[i] : 0.0f) + (dyg[i] - xhat[i] * c) * rs;
                store<T>(dxbuf.data(), dx, at.at(r) * cols, cols);
            }
        }
        for (int t = 0; t < nthreads; ++t) {
            const float* pg = partial.data() + static_cast<std::size_t>(t) * cols;
            for (std::int64_t i = 0; i < cols; ++i) dgamma[i] += pg[i];
        }
    });
}

namespace {
inline float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }
}  // namespace

void CpuBackend::do_swiglu_forward(const void* x, void* y, std::int64_t rows, std::int64_t cols,
                                   DType dtype) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        for_row_chunks(rows, cols, [&](std::int64_t r, std::int64_t c0, std::int64_t len) {
            float bg[kChunk], bu[kChunk], by[kChunk];
            const float* gate = load<T>(x, r * 2 * cols + c0, len, bg);
            const float* up = load<T>(x, r * 2 * cols + cols + c0, len, bu);
            float* ys = out_ptr<T>(y, r * cols + c0, by);
            for (std::int64_t i = 0; i < len; ++i) ys[i] = gate[i] * sigmoid(gate[i]) * up[i];
            store<T>(by, y, r * cols + c0, len);
        });
    });
}

void CpuBackend::do_swiglu_backward(const void* dy, const void* x, void* dx, std::int64_t rows,
                                    std::int64_t cols, DType dtype) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        for_row_chunks(rows, cols, [&](std::int64_t r, std::int64_t c0, std::int64_t len) {
            float bdy[kChunk], bg[kChunk], bu[kChunk], bdg[kChunk], bdu[kChunk];
            const float* d = load<T>(dy, r * cols + c0, len, bdy);
            const float* gate = load<T>(x, r * 2 * cols + c0, len, bg);
            const float* up = load<T>(x, r * 2 * cols + cols + c0, len, bu);
            float* dg = out_ptr<T>(dx, r * 2 * cols + c0, bdg);
            float* du = out_ptr<T>(dx, r * 2 * cols + cols + c0, bdu);
            for (std::int64_t i = 0; i < len; ++i) {
                // silu'(g) = s (1 + g (1 - s)), s = sigmoid(g)
                const float sg = sigmoid(gate[i]);
                du[i] = d[i] * gate[i] * sg;
                dg[i] = d[i] * up[i] * sg * (1.0f + gate[i] * (1.0f - sg));
            }
            store<T>(bdg, dx, r * 2 * cols + c0, len);
            store<T>(bdu, dx, r * 2 * cols + cols + c0, len);
        });
    });
}

namespace {

// The rotation of one head vector (in place, fp32) at one position; sign -1 rotates back.
struct Rope {
    std::int64_t dim = 0;
    bool interleaved = false;
    std::vector<float> inv_freq;  // [dim / 2]

    Rope(const QkvExpandArgs& a) : dim(a.rotary_dim), interleaved(a.rotary_interleaved) {
        for (std::int64_t i = 0; i < dim / 2; ++i)
            inv_freq.push_back(rope_inv_freq(a.rotary_base, dim, i));
    }
    void apply(float* v, std::int64_t pos, float sign) const {
        const std::int64_t half = dim / 2;
        for (std::int64_t i = 0; i < half; ++i) {
            const float angle = static_cast<float>(pos) * inv_freq[static_cast<std::size_t>(i)];
            const float c = std::cos(angle), s = sign * std::sin(angle);
            float& x0 = interleaved ? v[2 * i] : v[i];
            float& x1 = interleaved ? v[2 * i + 1] : v[i + half];
            const float a0 = x0, a1 = x1;
            x0 = a0 * c - a1 * s;
            x1 = a1 * c + a0 * s;
        }
    }
};

}  // namespace

void CpuBackend::do_qkv_expand_forward(const QkvExpandArgs& a, const void* qkv_grouped, void* qkv) {
    const std::int64_t rows = a.s * a.b, hn = a.hn, qpg = a.heads_per_group;
    const std::int64_t in_row = a.groups * (qpg + 2) * hn;
    const std::int64_t out_row = a.keep_groups ? in_row : a.groups * qpg * 3 * hn;
    const Rope rope(a);
    dispatch(a.dtype, [&](auto tag) {
        using T = decltype(tag);
#pragma omp parallel for schedule(static) if (rows * out_row >= kParallelMin)
        for (std::int64_t r = 0; r < rows; ++r) {
            std::vector<float> in(static_cast<std::size_t>(in_row)), out(static_cast<std::size_t>(out_row));
            float* dst = a.keep_groups ? in.data() : out.data();  // the rotated row itself
            convert(static_cast<const T*>(qkv_grouped) + r * in_row, in.data(), in.size());
            const std::int64_t pos = a.positions ? a.positions[r % a.b * a.s + r / a.b] : r / a.b;
            for (std::int64_t g = 0; g < a.groups; ++g) {
                float* grp = in.data() + g * (qpg + 2) * hn;
                // Rotate queries and the key in place, then copy out per head.
                if (rope.dim > 0)
                    for (std::int64_t j = 0; j <= qpg; ++j) rope.apply(grp + j * hn, pos, 1.0f);
                if (a.keep_groups) continue;
                for (std::int64_t i = 0; i < qpg; ++i) {
                    float* head = out.data() + (g * qpg + i) * 3 * hn;
                    std::copy(grp + i * hn, grp + (i + 1) * hn, head);
                    std::copy(grp + qpg * hn, grp + (qpg + 2) * hn, head + hn);  // key, value
                }
            }
            convert(dst, static_cast<T*>(qkv) + r * out_row, static_cast<std::size_t>(out_row));
        }
    });
}

void CpuBackend::do_qkv_expand_backward(const QkvExpandArgs& a, const void* dqkv, void* dqkv_grouped) {
    const std::int64_t rows = a.s * a.b, hn = a.hn, qpg = a.heads_per_group;
    const std::int64_t in_row = a.groups * (qpg + 2) * hn;
    const std::int64_t out_row = a.keep_groups ? in_row : a.groups * qpg * 3 * hn;
    const Rope rope(a);
    dispatch(a.dtype, [&](auto tag) {
        using T = decltype(tag);
#pragma omp parallel for schedule(static) if (rows * out_row >= kParallelMin)
        for (std::int64_t r = 0; r < rows; ++r) {
            std::vector<float> d(static_cast<std::size_t>(out_row)), dg(static_cast<std::size_t>(in_row), 0.0f);
            convert(static_cast<const T*>(dqkv) + r * out_row, d.data(), d.size());
            if (a.keep_groups) dg = d;  // K/V grads already summed per group
            const std::int64_t pos = a.positions ? a.positions[r % a.b * a.s + r / a.b] : r / a.b;
            for (std::int64_t g = 0; g < a.groups; ++g) {
                float* grp = dg.data() + g * (qpg + 2) * hn;
                for (std::int64_t i = 0; i < qpg && !a.keep_groups; ++i) {
                    const float* head = d.data() + (g * qpg + i) * 3 * hn;
                    std::copy(head, head + hn, grp + i * hn);
                    // Every head of the group read the same key and value: their grads add.
                    for (std::int64_t k = 0; k < 2 * hn; ++k) grp[qpg * hn + k] += head[hn + k];
                }
                // The rotation is orthogonal: its gradient is the rotation back.
                if (rope.dim > 0)
                    for (std::int64_t j = 0; j <= qpg; ++j) rope.apply(grp + j * hn, pos, -1.0f);
            }
            convert(dg.data(), static_cast<T*>(dqkv_grouped) + r * in_row, dg.size());
        }
    });
}

}  // namespace gpt::cpu
