// Elementwise ops: GELU, bias add/grad, dropout family (Philox masks identical to the CPU
// backend's), add/accumulate/scale/cast, AdamW, gradient statistics and sums.
#include <cmath>
#include <vector>

#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/vec_access.cuh"
#include "core/device_wait.hpp"
#include "core/philox.hpp"

namespace gpt::cuda {

namespace {

#define GPT_GRID_STRIDE(i, n)                                                                \
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; \
         i < (n); i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

template <typename T>
__global__ void gelu_fwd_kernel(const T* x, T* y, std::int64_t n, bool tanh_approx) {
    GPT_GRID_STRIDE(i, n) stf(y + i, gelu_f(ldf(x + i), tanh_approx));
}

template <typename T>
__global__ void gelu_bwd_kernel(const T* dy, const T* x, T* dx, std::int64_t n, bool tanh_approx) {
    GPT_GRID_STRIDE(i, n) stf(dx + i, ldf(dy + i) * gelu_grad_f(ldf(x + i), tanh_approx));
}

template <typename T>
__global__ void bias_add_kernel(T* x, const T* bias, std::int64_t rows, std::int64_t cols) {
    GPT_GRID_STRIDE(i, rows * cols) stf(x + i, ldf(x + i) + ldf(bias + i % cols));
}

// partial[chunk, col] = sum of m[r, col] over the chunk's rows, in row order.
template <typename T>
__global__ void column_partials_kernel(const T* m, float* partial, std::int64_t rows,
                                       std::int64_t cols, std::int64_t rows_per_chunk) {
    const std::int64_t col = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
    if (col >= cols) return;
    const std::int64_t r0 = blockIdx.y * rows_per_chunk;
    const std::int64_t r1 = min(rows, r0 + rows_per_chunk);
    float acc = 0.0f;
    for (std::int64_t r = r0; r < r1; ++r) acc += ldf(m + r * cols + col);
    partial[blockIdx.y * cols + col] = acc;
}

// The same with a 16-byte pack of columns per thread.
template <typename T>
__global__ void column_partials_vec_kernel(const T* m, float* partial, std::int64_t rows,
                                           std::int64_t cols, std::int64_t rows_per_chunk) {
    constexpr int N = kVec<T>;
    const std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
    if (p >= cols / N) return;
    const std::int64_t r0 = blockIdx.y * rows_per_chunk;
    const std::int64_t r1 = min(rows, r0 + rows_per_chunk);
    float acc[N] = {};
    for (std::int64_t r = r0; r < r1; ++r) {
        float v[N];
        load_vec(m + r * cols + p * N, v);
#pragma unroll
        for (int i = 0; i < N; ++i) acc[i] += v[i];
    }
#pragma unroll
    for (int i = 0; i < N; ++i) partial[blockIdx.y * cols + p * N + i] = acc[i];
}

// out[col] += the chunks' partials for col, in chunk order. A 32 x 32 block takes 32
// columns: thread row y sums the chunks y, y + 32, ... and row 0 adds the 32 results in
// order, so many chunks (a thousand from layernorm backward) are read by many threads.
constexpr int kSumTile = 32;

__global__ void chunk_sums_kernel(const float* partial, float* out, std::int64_t chunks,
                                  std::int64_t cols) {
    __shared__ float sh[kSumTile][kSumTile + 1];
    const std::int64_t col = blockIdx.x * static_cast<std::int64_t>(kSumTile) + threadIdx.x;
    float acc = 0.0f;
    if (col < cols)
        for (std::int64_t c = threadIdx.y; c < chunks; c += kSumTile) acc += partial[c * cols + col];
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y != 0 || col >= cols) return;
    float total = 0.0f;
    for (int y = 0; y < kSumTile; ++y) total += sh[y][threadIdx.x];
    out[col] += total;
}

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
                        std::int64_t cols, float p, std::uint64_t seed, std::uint64_t offset) {
    const bool drop = p > 0.0f;
    if (n % kVec<T> != 0 || !vectorizable<T>(cols, {x, bias, residual, out}) || (drop && offset % 4 != 0))
        return false;
    const unsigned grid = grid_for(n / kVec<T>);
    const std::uint32_t thr = dropout_threshold(p);
    const float keep = drop ? 1.0f / (1.0f - p) : 1.0f;
    if (drop)
        dropout_vec_kernel<T, true><<<grid, kThreads, 0, kStream>>>(x, bias, residual, out, n, cols, thr, keep, seed, offset);
    else
        dropout_vec_kernel<T, false><<<grid, kThreads, 0, kStream>>>(x, bias, residual, out, n, cols, thr, keep, seed, offset);
    return true;
}

template <typename T>
__global__ void add_kernel(const T* a, const T* b, T* y, std::int64_t n) {
    GPT_GRID_STRIDE(i, n) stf(y + i, ldf(a + i) + ldf(b + i));
}
template <typename T>
__global__ void accumulate_kernel(const T* x, float* y, std::int64_t n) {
    GPT_GRID_STRIDE(i, n) y[i] += ldf(x + i);
}
template <typename T>
__global__ void scale_kernel(T* x, float alpha, std::int64_t n) {
    GPT_GRID_STRIDE(i, n) stf(x + i, ldf(x + i) * alpha);
}
template <typename S, typename D>
__global__ void cast_kernel(const S* src, D* dst, std::int64_t n) {
    GPT_GRID_STRIDE(i, n) stf(dst + i, ldf(src + i));
}

// AdamW exactly as the CPU backend (lib/backend/cpu/adam.cpp), fp32 throughout.
template <typename T>
__global__ void adam_kernel(float* p, const float* g, float* m, float* v, T* model,
                            std::int64_t n, float b1, float b2, float eps, float gs,
                            float step_size, float inv_sqrt_bc2, float decay) {
    GPT_GRID_STRIDE(i, n) {
        const float gi = g[i] * gs;
        const float mi = b1 * m[i] + (1.0f - b1) * gi;
        const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        const float denom = sqrtf(vi) * inv_sqrt_bc2 + eps;
        const float pi = p[i] * decay - step_size * mi / denom;
        p[i] = pi;
        if (model) stf(model + i, pi);
    }
}

// Per-block partial sums in double (squares when `squares`), and whether all were finite.
// Squares in double: loss-scaled gradients near fp32's range would overflow as fp32 squares.
__global__ void reduce_kernel(const float* x, std::int64_t n, bool squares, double* partial,
                              int* finite) {
    __shared__ double sh[kThreads];
    __shared__ int bad;
    if (threadIdx.x == 0) bad = 0;
    __syncthreads();
    double acc = 0.0;
    bool ok = true;
    GPT_GRID_STRIDE(i, n) {
        const double xi = x[i];
        acc += squares ? xi * xi : xi;
        ok = ok && isfinite(x[i]);
    }
    if (!ok) bad = 1;  // benign race: every writer stores 1
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = sh[0];
        finite[blockIdx.x] = bad ? 0 : 1;
    }
}

void check_p(float p, const char* op) {
    GPT_REQUIRE(p >= 0.0f && p < 1.0f, UsageError, op, ": dropout probability ", p,
                " must be in [0, 1)");
}

}  // namespace

void CudaBackend::gelu_forward(const void* x, void* y, std::int64_t n, bool tanh_approx,
                               DType dtype) {
    GPT_REQUIRE(n >= 0, UsageError, "gelu_forward: negative size ", n);
    if (n == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        gelu_fwd_kernel<T><<<grid_for(n), kThreads, 0, kStream>>>(
            static_cast<const T*>(x), static_cast<T*>(y), n, tanh_approx);
    });
    GPT_CUDA_LAUNCH_CHECK("gelu_forward");
}

void CudaBackend::gelu_backward(const void* dy, const void* x, void* dx, std::int64_t n,
                                bool tanh_approx, DType dtype) {
    GPT_REQUIRE(n >= 0, UsageError, "gelu_backward: negative size ", n);
    if (n == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        gelu_bwd_kernel<T><<<grid_for(n), kThreads, 0, kStream>>>(
            static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<T*>(dx), n, tanh_approx);
    });
    GPT_CUDA_LAUNCH_CHECK("gelu_backward");
}

void CudaBackend::bias_add(void* x, const void* bias, std::int64_t rows, std::int64_t cols,
                           DType dtype) {
    GPT_REQUIRE(rows >= 0 && cols >= 0, UsageError, "bias_add: bad shape");
    if (rows * cols == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        bias_add_kernel<T><<<grid_for(rows * cols), kThreads, 0, kStream>>>(
            static_cast<T*>(x), static_cast<const T*>(bias), rows, cols);
    });
    GPT_CUDA_LAUNCH_CHECK("bias_add");
}

void CudaBackend::column_sums(const void* m, float* out, std::int64_t rows, std::int64_t cols,
                              DType dtype) {
    if (rows == 0 || cols == 0) return;
    const std::int64_t rpc = rows_per_chunk(rows);
    const std::int64_t chunks = (rows + rpc - 1) / rpc;
    Scratch partial(*this, static_cast<std::size_t>(chunks * cols) * sizeof(float));
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        if (vectorizable<T>(cols, {m})) {
            const int threads = row_threads(cols / kVec<T>, 1);
            const dim3 grid(static_cast<unsigned>((cols / kVec<T> + threads - 1) / threads), static_cast<unsigned>(chunks));
            column_partials_vec_kernel<T><<<grid, threads, 0, kStream>>>(static_cast<const T*>(m),
                                                                        partial.as<float>(), rows, cols, rpc);
        } else {
            const dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads), static_cast<unsigned>(chunks));
            column_partials_kernel<T><<<grid, kThreads, 0, kStream>>>(static_cast<const T*>(m),
                                                                      partial.as<float>(), rows, cols, rpc);
        }
    });
    GPT_CUDA_LAUNCH_CHECK("column sums");
    add_chunk_sums(partial.as<float>(), out, chunks, cols);
}

void CudaBackend::add_chunk_sums(const float* partial, float* out, std::int64_t chunks, std::int64_t cols) {
    if (cols == 0) return;
    GPT_REQUIRE((cols + kSumTile - 1) / kSumTile <= INT32_MAX, UsageError, "column sums: ", cols, " columns");
    chunk_sums_kernel<<<static_cast<unsigned>((cols + kSumTile - 1) / kSumTile), dim3(kSumTile, kSumTile), 0,
                        kStream>>>(partial, out, chunks, cols);
    GPT_CUDA_LAUNCH_CHECK("column sums");
}

void CudaBackend::bias_grad(const void* dy, float* dbias, std::int64_t rows, std::int64_t cols,
                            DType dtype) {
    GPT_REQUIRE(rows >= 0 && cols >= 0, UsageError, "bias_grad: bad shape");
    column_sums(dy, dbias, rows, cols, dtype);
}

void CudaBackend::dropout_forward(const void* x, void* y, std::int64_t n, float p,
                                  std::uint64_t seed, std::uint64_t offset, DType dtype) {
    check_p(p, "dropout_forward");
    GPT_REQUIRE(n >= 0, UsageError, "dropout_forward: negative size");
    if (p == 0.0f) {
        copy(y, x, static_cast<std::size_t>(n) * dtype_size(dtype));
        return;
    }
    if (n == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        if (launch_dropout_vec<T>(static_cast<const T*>(x), nullptr, nullptr, static_cast<T*>(y), n,
                                  kVec<T>, p, seed, offset))
            return;
        dropout_kernel<T, DropMode::Dropout><<<grid_for((n + 3) / 4 + 1), kThreads, 0, kStream>>>(
            static_cast<const T*>(x), nullptr, nullptr, static_cast<T*>(y), n, 1, true,
            dropout_threshold(p), 1.0f / (1.0f - p), seed, offset);
    });
    GPT_CUDA_LAUNCH_CHECK("dropout_forward");
}

void CudaBackend::bias_dropout_add(const void* x, const void* bias, const void* residual,
                                   void* out, std::int64_t rows, std::int64_t cols, float p,
                                   std::uint64_t seed, std::uint64_t offset, DType dtype) {
    check_p(p, "bias_dropout_add");
    GPT_REQUIRE(rows >= 0 && cols >= 0, UsageError, "bias_dropout_add: bad shape");
    const std::int64_t n = rows * cols;
    if (n == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        if (launch_dropout_vec<T>(static_cast<const T*>(x), static_cast<const T*>(bias),
                                  static_cast<const T*>(residual), static_cast<T*>(out), n, cols, p,
                                  seed, offset))
            return;
        dropout_kernel<T, DropMode::BiasDropoutAdd><<<grid_for((n + 3) / 4 + 1), kThreads, 0, kStream>>>(
            static_cast<const T*>(x), static_cast<const T*>(bias), static_cast<const T*>(residual),
            static_cast<T*>(out), n, cols, p > 0.0f, dropout_threshold(p), 1.0f / (1.0f - p),
            seed, offset);
    });
    GPT_CUDA_LAUNCH_CHECK("bias_dropout_add");
}

void CudaBackend::bias_dropout_add_backward(const void* dout, void* dx, float* dbias,
                                            std::int64_t rows, std::int64_t cols, float p,
                                            std::uint64_t seed, std::uint64_t offset,
                                            DType dtype) {
    check_p(p, "bias_dropout_add_backward");
    GPT_REQUIRE(rows >= 0 && cols >= 0, UsageError, "bias_dropout_add_backward: bad shape");
    dropout_forward(dout, dx, rows * cols, p, seed, offset, dtype);
    // The bias gradient is the column sum of dx as stored (as the CPU backend).
    if (dbias) bias_grad(dx, dbias, rows, cols, dtype);
}

void CudaBackend::add(const void* a, const void* b, void* y, std::int64_t n, DType dtype) {
    GPT_REQUIRE(n >= 0, UsageError, "add: negative size");
    if (n == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        add_kernel<T><<<grid_for(n), kThreads, 0, kStream>>>(
            static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y), n);
    });
    GPT_CUDA_LAUNCH_CHECK("add");
}

void CudaBackend::accumulate_f32(const void* x, float* y, std::int64_t n, DType dtype) {
    GPT_REQUIRE(n >= 0, UsageError, "accumulate_f32: negative size");
    if (n == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        accumulate_kernel<T><<<grid_for(n), kThreads, 0, kStream>>>(static_cast<const T*>(x), y, n);
    });
    GPT_CUDA_LAUNCH_CHECK("accumulate_f32");
}

void CudaBackend::scale(void* x, float alpha, std::int64_t n, DType dtype) {
    GPT_REQUIRE(n >= 0, UsageError, "scale: negative size");
    if (n == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        scale_kernel<T><<<grid_for(n), kThreads, 0, kStream>>>(static_cast<T*>(x), alpha, n);
    });
    GPT_CUDA_LAUNCH_CHECK("scale");
}

void CudaBackend::cast(const void* src, DType src_type, void* dst, DType dst_type,
                       std::int64_t n) {
    GPT_REQUIRE(n >= 0, UsageError, "cast: negative size");
    if (src_type == dst_type) {
        copy(dst, src, static_cast<std::size_t>(n) * dtype_size(src_type));
        return;
    }
    if (n == 0) return;
    // Through fp32, as the CPU backend: one correctly rounded step.
    dispatch(src_type, [&](auto stag) {
        using S = decltype(stag);
        dispatch(dst_type, [&](auto dtag) {
            using D = decltype(dtag);
            cast_kernel<S, D><<<grid_for(n), kThreads, 0, kStream>>>(static_cast<const S*>(src),
                                                                     static_cast<D*>(dst), n);
        });
    });
    GPT_CUDA_LAUNCH_CHECK("cast");
}

void CudaBackend::adam_step(const AdamArgs& a) {
    GPT_REQUIRE(a.n >= 0 && a.step >= 1, UsageError, "adam_step: n=", a.n, " step=", a.step);
    GPT_REQUIRE(a.n == 0 || (a.main_param && a.grad && a.exp_avg && a.exp_avg_sq), UsageError,
                "adam_step: null buffer");
    if (a.n == 0) return;
    // Bias corrections in double on the host: beta^step for large steps loses digits in fp32.
    const double bc1 = 1.0 - std::pow(static_cast<double>(a.beta1), static_cast<double>(a.step));
    const double bc2 = 1.0 - std::pow(static_cast<double>(a.beta2), static_cast<double>(a.step));
    const float step_size = static_cast<float>(a.lr / bc1);
    const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
    const float decay = 1.0f - a.lr * a.weight_decay;
    // An fp32 model copy that is the main parameter itself needs no second write.
    void* model = a.model_param == a.main_param ? nullptr : a.model_param;
    dispatch(model ? a.model_dtype : DType::F32, [&](auto tag) {
        using T = decltype(tag);
        adam_kernel<T><<<grid_for(a.n), kThreads, 0, kStream>>>(
            a.main_param, a.grad, a.exp_avg, a.exp_avg_sq, static_cast<T*>(model), a.n, a.beta1,
            a.beta2, a.eps, a.grad_scale, step_size, inv_sqrt_bc2, decay);
    });
    GPT_CUDA_LAUNCH_CHECK("adam_step");
}

namespace {
// Runs reduce_kernel and finishes on the host in block order (deterministic).
std::pair<double, bool> reduce(void* partials, const float* x, std::int64_t n, bool squares,
                               const char* op) {
    double* part = static_cast<double*>(partials);
    int* fin = reinterpret_cast<int*>(part + kReduceBlocks);
    const unsigned blocks = std::min<unsigned>(kReduceBlocks, grid_for(n));
    reduce_kernel<<<blocks, kThreads, 0, kStream>>>(x, n, squares, part, fin);
    GPT_CUDA_LAUNCH_CHECK(op);
    std::vector<double> hp(blocks);
    std::vector<int> hf(blocks);
    wait_for_cuda_stream(kStream, op);  // bounded by the hang watchdog, unlike cudaMemcpy
    GPT_CUDA_CHECK(cudaMemcpy(hp.data(), part, blocks * sizeof(double), cudaMemcpyDeviceToHost), op);
    GPT_CUDA_CHECK(cudaMemcpy(hf.data(), fin, blocks * sizeof(int), cudaMemcpyDeviceToHost), op);
    double total = 0.0;
    bool finite = true;
    for (unsigned b = 0; b < blocks; ++b) {
        total += hp[b];
        finite = finite && hf[b] != 0;
    }
    return {total, finite};
}
}  // namespace

GradStats CudaBackend::grad_stats(const float* g, std::int64_t n) {
    GPT_REQUIRE(n >= 0, UsageError, "grad_stats: negative size");
    if (n == 0) return GradStats{0.0, true};
    auto [total, finite] = reduce(reduce_partials_, g, n, true, "grad_stats");
    return GradStats{total, finite};
}

double CudaBackend::sum(const float* x, std::int64_t n) {
    GPT_REQUIRE(n >= 0, UsageError, "sum: negative size");
    if (n == 0) return 0.0;
    return reduce(reduce_partials_, x, n, false, "sum").first;
}

}  // namespace gpt::cuda
