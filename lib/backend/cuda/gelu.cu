// GELU forward and backward (exact or tanh), elementwise in fp32 as the CPU backend's gelu.cpp.
// Also the unfused GEMM epilogues' GELU passes (gemm.cu, GPT_CUDA_GEMM_EPILOGUE=unfused), so
// they run near memory bandwidth: 16-byte loads and stores wherever the length and the
// pointers allow (the MLP's activations always do), one element per access otherwise.
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/vec_access.cuh"

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

// packs = n / kVec<T>: one 16-byte pack per step of the grid-stride loop.
template <typename T>
__global__ void gelu_fwd_vec_kernel(const T* x, T* y, std::int64_t packs, bool tanh_approx) {
    constexpr int V = kVec<T>;
    GPT_GRID_STRIDE(p, packs) {
        float v[V];
        load_vec(x + p * V, v);
#pragma unroll
        for (int i = 0; i < V; ++i) v[i] = gelu_f(v[i], tanh_approx);
        store_vec(y + p * V, v);
    }
}

// dx may be dy (the GEMM epilogue's in-place pass): each pack is read before it is written.
template <typename T>
__global__ void gelu_bwd_vec_kernel(const T* dy, const T* x, T* dx, std::int64_t packs, bool tanh_approx) {
    constexpr int V = kVec<T>;
    GPT_GRID_STRIDE(p, packs) {
        float g[V], v[V];
        load_vec(dy + p * V, g);
        load_vec(x + p * V, v);
#pragma unroll
        for (int i = 0; i < V; ++i) g[i] *= gelu_grad_f(v[i], tanh_approx);
        store_vec(dx + p * V, g);
    }
}

}  // namespace

void CudaBackend::do_gelu_forward(const void* x, void* y, std::int64_t n, bool tanh_approx,
                                  DType dtype) {
    if (n == 0) return;
    const cudaStream_t st = cuda_stream(stream());
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        const T* xt = static_cast<const T*>(x);
        T* yt = static_cast<T*>(y);
        if (vectorizable<T>(n, {x, y})) {
            const std::int64_t packs = n / kVec<T>;
            gelu_fwd_vec_kernel<T><<<grid_for(packs), kThreads, 0, st>>>(xt, yt, packs, tanh_approx);
        } else {
            gelu_fwd_kernel<T><<<grid_for(n), kThreads, 0, st>>>(xt, yt, n, tanh_approx);
        }
    });
    GPT_CUDA_LAUNCH_CHECK("gelu_forward");
}

void CudaBackend::do_gelu_backward(const void* dy, const void* x, void* dx, std::int64_t n,
                                   bool tanh_approx, DType dtype) {
    if (n == 0) return;
    const cudaStream_t st = cuda_stream(stream());
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        const T* dyt = static_cast<const T*>(dy);
        const T* xt = static_cast<const T*>(x);
        T* dxt = static_cast<T*>(dx);
        if (vectorizable<T>(n, {dy, x, dx})) {
            const std::int64_t packs = n / kVec<T>;
            gelu_bwd_vec_kernel<T><<<grid_for(packs), kThreads, 0, st>>>(dyt, xt, dxt, packs, tanh_approx);
        } else {
            gelu_bwd_kernel<T><<<grid_for(n), kThreads, 0, st>>>(dyt, xt, dxt, n, tanh_approx);
        }
    });
    GPT_CUDA_LAUNCH_CHECK("gelu_backward");
}

}  // namespace gpt::cuda
