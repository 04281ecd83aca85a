// Helpers shared by the CUDA kernels: error checks that throw DeviceError with file:line and
// the op name, dtype dispatch onto CUDA storage types, fp32 load/store, launch geometry.
// Included only by .cu files of backend/cuda (C++17, see cmake/GptDependencies.cmake).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/dtype.hpp"
#include "core/errors.hpp"
#include "core/stream.hpp"

// GPT_CUDA_CHECK(cudaMemcpy(...), "copy_to_host")
#define GPT_CUDA_CHECK(expr, op)                                                              \
    do {                                                                                      \
        cudaError_t gpt_err_ = (expr);                                                        \
        if (gpt_err_ != cudaSuccess)                                                          \
            throw ::gpt::DeviceError(::gpt::detail::concat(__FILE__, ":", __LINE__, ": ", op, \
                                                           ": ", #expr, " failed: ",          \
                                                           cudaGetErrorString(gpt_err_)));    \
    } while (0)

// After a kernel launch: a bad configuration shows here, not at the next synchronisation.
#define GPT_CUDA_LAUNCH_CHECK(op) GPT_CUDA_CHECK(cudaGetLastError(), op)

namespace gpt::cuda {

// A run-time kernel switch (README, "Kernel switches"): Read() (an environment reader of
// core/environment.hpp) the first time it is asked for, then what its setter stored (the
// tests and benches select variants without restarting). One value per process.
template <auto Read>
auto& kernel_switch() {
    static auto value = Read();
    return value;
}

// The CUDA handle of a backend's stream (CudaBackend::stream(); core/stream.hpp).
inline cudaStream_t cuda_stream(const Stream& s) { return static_cast<cudaStream_t>(s.native()); }

constexpr int kThreads = 256;
// Blocks of the two-stage reductions (grad_stats, sum): partials are summed on the host in
// block order, so results do not depend on scheduling.
constexpr int kReduceBlocks = 1024;

// Blocks for a grid-stride loop over n items: enough to fill an H100/H200 several times.
inline unsigned grid_for(std::int64_t n, int threads = kThreads) {
    std::int64_t b = (n + threads - 1) / threads;
    return static_cast<unsigned>(std::max<std::int64_t>(1, std::min<std::int64_t>(b, 8192)));
}

// Grid-stride loop over [0, n): any n fits the grid grid_for gives.
#define GPT_GRID_STRIDE(i, n)                                                                \
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; \
         i < (n); i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

// Rows go to blocks in a grid-stride loop, so any row count fits the grid limits.
// A norm kernel's op row r as its buffers' row (NormRows in backend.hpp); no division for
// the contiguous rows (block 1).
__device__ __forceinline__ std::int64_t norm_row(const NormRows& at, std::int64_t r) {
    return at.block == 1 ? r * at.stride + at.first : (r / at.block) * at.stride + at.first + r % at.block;
}

#define GPT_ROW_LOOP(r, rows) \
    for (std::int64_t r = blockIdx.x; r < (rows); r += gridDim.x)

inline unsigned row_grid(std::int64_t rows) {
    return static_cast<unsigned>(std::max<std::int64_t>(1, std::min<std::int64_t>(rows, 65535)));
}


// Rows per chunk of the two-stage column reductions (bias and layernorm parameter
// gradients: fp32 partials per chunk, then added in chunk order): at least 16 rows and at
// most 1024 chunks, enough blocks to fill an H100/H200 while the partials stay a few
// percent of the traffic.
inline std::int64_t rows_per_chunk(std::int64_t rows) {
    return std::max<std::int64_t>(16, (rows + 1023) / 1024);
}

// Calls f(T{}) with T the CUDA storage type of dtype.
template <typename F>
void dispatch(DType dtype, F&& f) {
    switch (dtype) {
        case DType::F32: f(float{}); return;
        case DType::F16: f(__half{}); return;
        case DType::BF16: f(__nv_bfloat16{}); return;
    }
    GPT_THROW(InternalError, "unknown dtype ", static_cast<int>(dtype));
}

__device__ __forceinline__ float ldf(const float* p) { return *p; }
__device__ __forceinline__ float ldf(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float ldf(const __nv_bfloat16* p) { return __bfloat162float(*p); }

// Round-to-nearest-even stores, as the CPU backend's conversions.
__device__ __forceinline__ void stf(float* p, float v) { *p = v; }
__device__ __forceinline__ void stf(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void stf(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
// `shared` holds 32 floats; the leading barrier lets callers reuse it back to back.
__device__ __forceinline__ float block_sum(float v, float* shared) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    const int nwarps = blockDim.x >> 5;
    float t = lane < nwarps ? shared[lane] : 0.0f;
    return warp_sum(t);
}
__device__ __forceinline__ float block_max(float v, float* shared) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    const int nwarps = blockDim.x >> 5;
    float t = lane < nwarps ? shared[lane] : -INFINITY;
    return warp_max(t);
}

// GELU as the CPU backend defines it (lib/backend/cpu/vmath.hpp): exact x*Phi(x), or the
// tanh form written as x*sigmoid(2u) so nothing cancels for negative x.
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluTanhCubic = 0.044715f;

__device__ __forceinline__ float gelu_f(float x, bool tanh_approx) {
    if (tanh_approx) {
        const float u = kSqrt2OverPi * (x + kGeluTanhCubic * x * x * x);
        return x / (1.0f + expf(-2.0f * u));
    }
    return x * normcdff(x);
}
__device__ __forceinline__ float gelu_grad_f(float x, bool tanh_approx) {
    if (tanh_approx) {
        const float u = kSqrt2OverPi * (x + kGeluTanhCubic * x * x * x);
        const float e = expf(-2.0f * u);
        const float s = 1.0f / (1.0f + e);
        const float one_minus_s = e > 1e30f ? 1.0f : e * s;
        const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluTanhCubic * x * x);
        return s + x * s * one_minus_s * 2.0f * du;
    }
    return normcdff(x) + x * kInvSqrt2Pi * expf(-0.5f * x * x);
}

// Squared ReLU as the CPU backend's (vmath.hpp): NaN passes, the gradient is 0 where x <= 0.
__device__ __forceinline__ float squared_relu_f(float x) { return x <= 0.0f ? 0.0f : x * x; }
__device__ __forceinline__ float squared_relu_grad_f(float dy, float x) { return x <= 0.0f ? 0.0f : dy * (2.0f * x); }

}  // namespace gpt::cuda
