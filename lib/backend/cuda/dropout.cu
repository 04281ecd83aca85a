// Dropout and bias-dropout-add, with Philox masks identical to the CPU backend's (never
// stored: backward regenerates them; its composition is Backend::bias_dropout_add_backward).
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/vec_access.cuh"
#include "core/philox.hpp"

namespace gpt::cuda {

namespace {


// One thread per Philox block: the four 32-bit draws of block g decide elements 4g..4g+3 of
// the stream (philox.hpp), exactly the CPU backend's indexing. Element i of the call is
// stream element offset + i.
enum class DropMode { Dropout, BiasDropoutAdd };

template <typename T, DropMode M>
__global__ void dropout_kernel(const T* x, const T* bias, const T* residual, T* out,
                               std::int64_t n, std::int64_t cols, bool drop,
                               std::uint32_t threshold, float keep_scale, std::uint64_t seed,
                               std::uint64_t offset) {
    const std::uint64_t first_block = offset >> 2;
    const std::uint64_t blocks = ((offset + static_cast<std::uint64_t>(n) + 3) >> 2) - first_block;
    GPT_GRID_STRIDE(t, static_cast<std::int64_t>(blocks)) {
        const std::uint64_t g = first_block + static_cast<std::uint64_t>(t);
        std::uint32_t bits[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
        if (drop) {
            const Philox4x32 r = philox4x32_10(static_cast<std::uint32_t>(g),
                                               static_cast<std::uint32_t>(g >> 32), 0u, 0u, seed);
            for (int q = 0; q < 4; ++q) bits[q] = r.v[q];
        }
        for (int q = 0; q < 4; ++q) {
            const std::uint64_t e = g * 4 + q;
            if (e < offset || e >= offset + static_cast<std::uint64_t>(n)) continue;
            const std::int64_t i = static_cast<std::int64_t>(e - offset);
            const float mult = drop ? (bits[q] >= threshold ? keep_scale : 0.0f) : 1.0f;
            if constexpr (M == DropMode::Dropout) {
                stf(out + i, ldf(x + i) * mult);
            } else {
                const float b = bias ? ldf(bias + i % cols) : 0.0f;
                stf(out + i, ldf(residual + i) + (ldf(x + i) + b) * mult);
            }
        }
    }
}

// Vectorized dropout family: a thread per 16-byte pack, whose N elements (a multiple of 4)
// are N/4 whole Philox blocks when the stream offset is a multiple of 4. Bias (nullable)
// is indexed by column, cols a multiple of N so a pack never straddles two rows; residual
// is nullable (plain dropout).
template <typename T, bool kDrop>
__global__ void dropout_vec_kernel(const T* x, const T* bias, const T* residual, T* out,
                                   std::int64_t n, std::int64_t cols, std::uint32_t threshold,
                                   float keep_scale, std::uint64_t seed, std::uint64_t offset) {
    constexpr int N = kVec<T>;
    GPT_GRID_STRIDE(p, n / N) {
        const std::int64_t i = p * N;
        float v[N], acc[N];
        load_vec(x + i, v);
        if (bias) {
            float b[N];
            load_vec(bias + i % cols, b);
#pragma unroll
            for (int k = 0; k < N; ++k) v[k] += b[k];
        }
        if constexpr (kDrop) {
#pragma unroll
            for (int q = 0; q < N / 4; ++q) {
                const std::uint64_t g = ((offset + static_cast<std::uint64_t>(i)) >> 2) + q;
                const Philox4x32 r = philox4x32_10(static_cast<std::uint32_t>(g),
                                                   static_cast<std::uint32_t>(g >> 32), 0u, 0u, seed);
#pragma unroll
                for (int k = 0; k < 4; ++k) v[4 * q + k] *= r.v[k] >= threshold ? keep_scale : 0.0f;
            }
        }
        if (residual) {
            load_vec(residual + i, acc);
#pragma unroll
            for (int k = 0; k < N; ++k) acc[k] += v[k];
        } else {
#pragma unroll
            for (int k = 0; k < N; ++k) acc[k] = v[k];
        }
        store_vec(out + i, acc);
    }
}

// Launches dropout_vec_kernel when the operands allow it; false otherwise.
template <typename T>
bool launch_dropout_vec(const T* x, const T* bias, const T* residual, T* out, std::int64_t n,
                        std::int64_t cols, float p, std::uint64_t seed, std::uint64_t offset,
                        cudaStream_t stream) {
    const bool drop = p > 0.0f;
    if (n % kVec<T> != 0 || !vectorizable<T>(cols, {x, bias, residual, out}) || (drop && offset % 4 != 0))
        return false;
    const unsigned grid = grid_for(n / kVec<T>);
    const std::uint32_t thr = dropout_threshold(p);
    const float keep = drop ? 1.0f / (1.0f - p) : 1.0f;
    if (drop)
        dropout_vec_kernel<T, true><<<grid, kThreads, 0, stream>>>(x, bias, residual, out, n, cols, thr, keep, seed, offset);
    else
        dropout_vec_kernel<T, false><<<grid, kThreads, 0, stream>>>(x, bias, residual, out, n, cols, thr, keep, seed, offset);
    return true;
}

}  // namespace

void CudaBackend::do_dropout_forward(const void* x, void* y, std::int64_t n, float p,
                                     std::uint64_t seed, std::uint64_t offset, DType dtype) {
    if (n == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        if (launch_dropout_vec<T>(static_cast<const T*>(x), nullptr, nullptr, static_cast<T*>(y), n,
                                  kVec<T>, p, seed, offset, cuda_stream(stream())))
            return;
        dropout_kernel<T, DropMode::Dropout><<<grid_for((n + 3) / 4 + 1), kThreads, 0, cuda_stream(stream())>>>(
            static_cast<const T*>(x), nullptr, nullptr, static_cast<T*>(y), n, 1, true,
            dropout_threshold(p), 1.0f / (1.0f - p), seed, offset);
    });
    GPT_CUDA_LAUNCH_CHECK("dropout_forward");
}

void CudaBackend::do_bias_dropout_add(const void* x, const void* bias, const void* residual,
                                      void* out, std::int64_t rows, std::int64_t cols, float p,
                                      std::uint64_t seed, std::uint64_t offset, DType dtype) {
    const std::int64_t n = rows * cols;
    if (n == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        if (launch_dropout_vec<T>(static_cast<const T*>(x), static_cast<const T*>(bias),
                                  static_cast<const T*>(residual), static_cast<T*>(out), n, cols, p,
                                  seed, offset, cuda_stream(stream())))
            return;
        dropout_kernel<T, DropMode::BiasDropoutAdd><<<grid_for((n + 3) / 4 + 1), kThreads, 0, cuda_stream(stream())>>>(
            static_cast<const T*>(x), static_cast<const T*>(bias), static_cast<const T*>(residual),
            static_cast<T*>(out), n, cols, p > 0.0f, dropout_threshold(p), 1.0f / (1.0f - p),
            seed, offset);
    });
    GPT_CUDA_LAUNCH_CHECK("bias_dropout_add");
}

}  // namespace gpt::cuda
