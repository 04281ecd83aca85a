// GELU forward and backward (exact or tanh), elementwise in fp32 as the CPU backend's gelu.cpp.
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_common.cuh"

namespace gpt::cuda {

namespace {

template <typename T>
__global__ void gelu_fwd_kernel(const T* x, T* y, std::int64_t n, bool tanh_approx) {
    GPT_GRID_STRIDE(i, n) stf(y + i, gelu_f(ldf(x + i), tanh_approx));
}

template <typename T>
__global__ void gelu_bwd_kernel(const T* dy, const T* x, T* dx, std::int64_t n, bool tanh_approx) {
    GPT_GRID_STRIDE(i, n) stf(dx + i, ldf(dy + i) * gelu_grad_f(ldf(x + i), tanh_approx));
}

}  // namespace

void CudaBackend::do_gelu_forward(const void* x, void* y, std::int64_t n, bool tanh_approx,
                                  DType dtype) {
    if (n == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        gelu_fwd_kernel<T><<<grid_for(n), kThreads, 0, cuda_stream(stream())>>>(
            static_cast<const T*>(x), static_cast<T*>(y), n, tanh_approx);
    });
    GPT_CUDA_LAUNCH_CHECK("gelu_forward");
}

void CudaBackend::do_gelu_backward(const void* dy, const void* x, void* dx, std::int64_t n,
                                   bool tanh_approx, DType dtype) {
    if (n == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        gelu_bwd_kernel<T><<<grid_for(n), kThreads, 0, cuda_stream(stream())>>>(
            static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<T*>(dx), n, tanh_approx);
    });
    GPT_CUDA_LAUNCH_CHECK("gelu_backward");
}

}  // namespace gpt::cuda
