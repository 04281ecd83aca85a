// The MLP's element-wise activations, in fp32 as the CPU backend's gelu.cpp: GELU forward
// and backward (exact or tanh), squared ReLU (--squared-relu); one set of kernels over the
// activation (GeluOp, SquaredReluOp).
// Also the unfused GEMM epilogues' GELU passes (gemm.cu, GPT_CUDA_GEMM_EPILOGUE=unfused), so
// they run near memory bandwidth: 16-byte loads and stores wherever the length and the
// pointers allow (the MLP's activations always do), one element per access otherwise.
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_codes.cuh"
#include "backend/cuda/vec_access.cuh"

namespace gpt::cuda {

namespace {

// The activation each kernel applies: fn(x) forward, grad(dy, x) = dy * fn'(x) backward.
struct GeluOp {
    bool tanh_approx;
    __device__ float fn(float x) const { return gelu_f(x, tanh_approx); }
    __device__ float grad(float dy, float x) const { return dy * gelu_grad_f(x, tanh_approx); }
};
struct SquaredReluOp {
    __device__ float fn(float x) const { return squared_relu_f(x); }
    __device__ float grad(float dy, float x) const { return squared_relu_grad_f(dy, x); }
};

// With Q also the FP8 codes of y as stored (fc2's input, Backend::gelu_forward_fp8).
template <typename T, bool Q, class Op>
__global__ void act_fwd_kernel(const T* x, T* y, std::int64_t n, Op op, Fp8CodesArg codes) {
    unsigned m = 0;
    [[maybe_unused]] const float scale = Q ? *codes.scale : 1.0f;
    GPT_GRID_STRIDE(i, n) {
        const float v = op.fn(ldf(x + i));
        stf(y + i, v);
        if constexpr (Q) store_codes<T, 1>({v}, scale, codes.e4m3, codes.q + i, m);
    }
    if constexpr (Q)
        if (codes.amax) amax_commit(m, codes.amax);
}

template <typename T, class Op>
__global__ void act_bwd_kernel(const T* dy, const T* x, T* dx, std::int64_t n, Op op) {
    GPT_GRID_STRIDE(i, n) stf(dx + i, op.grad(ldf(dy + i), ldf(x + i)));
}

// packs = n / kVec<T>: one 16-byte pack per step of the grid-stride loop.
template <typename T, bool Q, class Op>
__global__ void act_fwd_vec_kernel(const T* x, T* y, std::int64_t packs, Op op, Fp8CodesArg codes) {
    constexpr int V = kVec<T>;
    unsigned m = 0;
    [[maybe_unused]] const float scale = Q ? *codes.scale : 1.0f;
    GPT_GRID_STRIDE(p, packs) {
        float v[V];
        load_vec(x + p * V, v);
#pragma unroll
        for (int i = 0; i < V; ++i) v[i] = op.fn(v[i]);
        store_vec(y + p * V, v);
        if constexpr (Q) store_codes<T, V>(v, scale, codes.e4m3, codes.q + p * V, m);
    }
    if constexpr (Q)
        if (codes.amax) amax_commit(m, codes.amax);
}

// dx may be dy (the GEMM epilogue's in-place pass): each pack is read before it is written.
template <typename T, class Op>
__global__ void act_bwd_vec_kernel(const T* dy, const T* x, T* dx, std::int64_t packs, Op op) {
    constexpr int V = kVec<T>;
    GPT_GRID_STRIDE(p, packs) {
        float g[V], v[V];
        load_vec(dy + p * V, g);
        load_vec(x + p * V, v);
#pragma unroll
        for (int i = 0; i < V; ++i) g[i] = op.grad(g[i], v[i]);
        store_vec(dx + p * V, g);
    }
}

template <class Op>
void launch_forward(cudaStream_t st, const void* x, void* y, std::int64_t n, Op op, DType dtype,
                    const Backend::Fp8Codes* codes) {
    const Fp8CodesArg arg = codes_arg(codes);
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        const T* xt = static_cast<const T*>(x);
        T* yt = static_cast<T*>(y);
        auto launch = [&](auto with_codes) {
            constexpr bool Q = decltype(with_codes)::value;
            if (vectorizable<T>(n, {x, y, arg.q})) {
                const std::int64_t packs = n / kVec<T>;
                act_fwd_vec_kernel<T, Q, Op><<<grid_for(packs), kThreads, 0, st>>>(xt, yt, packs, op, arg);
            } else {
                act_fwd_kernel<T, Q, Op><<<grid_for(n), kThreads, 0, st>>>(xt, yt, n, op, arg);
            }
        };
        if (codes) launch(std::true_type{});
        else launch(std::false_type{});
    });
}

template <class Op>
void launch_backward(cudaStream_t st, const void* dy, const void* x, void* dx, std::int64_t n, Op op,
                     DType dtype) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        const T* dyt = static_cast<const T*>(dy);
        const T* xt = static_cast<const T*>(x);
        T* dxt = static_cast<T*>(dx);
        if (vectorizable<T>(n, {dy, x, dx})) {
            const std::int64_t packs = n / kVec<T>;
            act_bwd_vec_kernel<T, Op><<<grid_for(packs), kThreads, 0, st>>>(dyt, xt, dxt, packs, op);
        } else {
            act_bwd_kernel<T, Op><<<grid_for(n), kThreads, 0, st>>>(dyt, xt, dxt, n, op);
        }
    });
}

}  // namespace

void CudaBackend::do_gelu_forward(const void* x, void* y, std::int64_t n, bool tanh_approx,
                                  DType dtype) {
    launch_gelu_forward(x, y, n, tanh_approx, dtype, nullptr);
}

void CudaBackend::do_gelu_forward_fp8(const void* x, void* y, std::int64_t n, bool tanh_approx, DType dtype,
                                      const Fp8Codes& codes) {
    launch_gelu_forward(x, y, n, tanh_approx, dtype, &codes);
}

void CudaBackend::launch_gelu_forward(const void* x, void* y, std::int64_t n, bool tanh_approx, DType dtype,
                               const Fp8Codes* codes) {
    if (n == 0) return;
    launch_forward(cuda_stream(stream()), x, y, n, GeluOp{tanh_approx}, dtype, codes);
    GPT_CUDA_LAUNCH_CHECK(codes ? "gelu_forward (with FP8 codes)" : "gelu_forward");
}

void CudaBackend::do_gelu_backward(const void* dy, const void* x, void* dx, std::int64_t n,
                                   bool tanh_approx, DType dtype) {
    if (n == 0) return;
    launch_backward(cuda_stream(stream()), dy, x, dx, n, GeluOp{tanh_approx}, dtype);
    GPT_CUDA_LAUNCH_CHECK("gelu_backward");
}

void CudaBackend::do_squared_relu_forward(const void* x, void* y, std::int64_t n, DType dtype) {
    launch_squared_relu_forward(x, y, n, dtype, nullptr);
}

void CudaBackend::do_squared_relu_forward_fp8(const void* x, void* y, std::int64_t n, DType dtype,
                                              const Fp8Codes& codes) {
    launch_squared_relu_forward(x, y, n, dtype, &codes);
}

void CudaBackend::launch_squared_relu_forward(const void* x, void* y, std::int64_t n, DType dtype,
                                              const Fp8Codes* codes) {
    if (n == 0) return;
    launch_forward(cuda_stream(stream()), x, y, n, SquaredReluOp{}, dtype, codes);
    GPT_CUDA_LAUNCH_CHECK(codes ? "squared_relu_forward (with FP8 codes)" : "squared_relu_forward");
}

void CudaBackend::do_squared_relu_backward(const void* dy, const void* x, void* dx, std::int64_t n,
                                           DType dtype) {
    if (n == 0) return;
    launch_backward(cuda_stream(stream()), dy, x, dx, n, SquaredReluOp{}, dtype);
    GPT_CUDA_LAUNCH_CHECK("squared_relu_backward");
}

}  // namespace gpt::cuda
