// The MLP's element-wise activations: GELU forward/backward, exact (erf) or the tanh
// approximation (--openai-gelu), and squared ReLU (--squared-relu).
#include "backend/cpu/common.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/vmath.hpp"

namespace gpt::cpu {

void CpuBackend::do_gelu_forward(const void* x, void* y, std::int64_t n, bool tanh_approx,
                                 DType dtype) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        for_chunks(n, [&](std::int64_t i0, std::int64_t len) {
            float bx[kChunk], by[kChunk];
            const float* xs = load<T>(x, i0, len, bx);
            float* ys = out_ptr<T>(y, i0, by);
            if (tanh_approx) {
#pragma omp simd
                for (std::int64_t i = 0; i < len; ++i) ys[i] = gelu_tanh(xs[i]);
            } else {
#pragma omp simd
                for (std::int64_t i = 0; i < len; ++i) ys[i] = gelu_erf(xs[i]);
            }
            store<T>(by, y, i0, len);
        });
    });
}

void CpuBackend::do_gelu_backward(const void* dy, const void* x, void* dx, std::int64_t n,
                                  bool tanh_approx, DType dtype) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        for_chunks(n, [&](std::int64_t i0, std::int64_t len) {
            float bdy[kChunk], bx[kChunk], bdx[kChunk];
            const float* dys = load<T>(dy, i0, len, bdy);
            const float* xs = load<T>(x, i0, len, bx);
            float* dxs = out_ptr<T>(dx, i0, bdx);
            if (tanh_approx) {
#pragma omp simd
                for (std::int64_t i = 0; i < len; ++i) dxs[i] = dys[i] * gelu_tanh_grad(xs[i]);
            } else {
#pragma omp simd
                for (std::int64_t i = 0; i < len; ++i) dxs[i] = dys[i] * gelu_erf_grad(xs[i]);
            }
            store<T>(bdx, dx, i0, len);
        });
    });
}

// relu(x)^2 as PyTorch's pow(relu(x), 2): relu keeps NaN (x <= 0 is false for it), the
// square is one fp32 product rounded once to T.
void CpuBackend::do_squared_relu_forward(const void* x, void* y, std::int64_t n, DType dtype) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        for_chunks(n, [&](std::int64_t i0, std::int64_t len) {
            float bx[kChunk], by[kChunk];
            const float* xs = load<T>(x, i0, len, bx);
            float* ys = out_ptr<T>(y, i0, by);
#pragma omp simd
            for (std::int64_t i = 0; i < len; ++i) ys[i] = squared_relu(xs[i]);
            store<T>(by, y, i0, len);
        });
    });
}

// dx = dy * 2x where x > 0, else 0 (PyTorch's relu backward masks x <= 0, a NaN x passes).
void CpuBackend::do_squared_relu_backward(const void* dy, const void* x, void* dx, std::int64_t n,
                                          DType dtype) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        for_chunks(n, [&](std::int64_t i0, std::int64_t len) {
            float bdy[kChunk], bx[kChunk], bdx[kChunk];
            const float* dys = load<T>(dy, i0, len, bdy);
            const float* xs = load<T>(x, i0, len, bx);
            float* dxs = out_ptr<T>(dx, i0, bdx);
#pragma omp simd
            for (std::int64_t i = 0; i < len; ++i) dxs[i] = squared_relu_grad(dys[i], xs[i]);
            store<T>(bdx, dx, i0, len);
        });
    });
}

}  // namespace gpt::cpu
