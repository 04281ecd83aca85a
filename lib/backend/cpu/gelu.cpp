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
        if (tanh_approx) map_elements<T>(x, y, n, [](float v) { return gelu_tanh(v); });
        else map_elements<T>(x, y, n, [](float v) { return gelu_erf(v); });
    });
}

void CpuBackend::do_gelu_backward(const void* dy, const void* x, void* dx, std::int64_t n,
                                  bool tanh_approx, DType dtype) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        if (tanh_approx) map_elements<T>(dy, x, dx, n, [](float g, float v) { return g * gelu_tanh_grad(v); });
        else map_elements<T>(dy, x, dx, n, [](float g, float v) { return g * gelu_erf_grad(v); });
    });
}

// relu(x)^2 as PyTorch's pow(relu(x), 2): relu keeps NaN (x <= 0 is false for it), the
// square is one fp32 product rounded once to T.
void CpuBackend::do_squared_relu_forward(const void* x, void* y, std::int64_t n, DType dtype) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        map_elements<T>(x, y, n, [](float v) { return squared_relu(v); });
    });
}

// dx = dy * 2x where x > 0, else 0 (PyTorch's relu backward masks x <= 0, a NaN x passes).
void CpuBackend::do_squared_relu_backward(const void* dy, const void* x, void* dx, std::int64_t n,
                                          DType dtype) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        map_elements<T>(dy, x, dx, n, [](float g, float v) { return squared_relu_grad(g, v); });
    });
}

}  // namespace gpt::cpu
