// Bias add and bias gradient (deterministic column sums), add, accumulate, scale and casts.
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/vec_access.cuh"

namespace gpt::cuda {

namespace {

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

}  // namespace

void CudaBackend::do_bias_add(void* x, const void* bias, std::int64_t rows, std::int64_t cols,
                              DType dtype) {
    if (rows * cols == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        bias_add_kernel<T><<<grid_for(rows * cols), kThreads, 0, cuda_stream(stream())>>>(
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
            column_partials_vec_kernel<T><<<grid, threads, 0, cuda_stream(stream())>>>(static_cast<const T*>(m),
                                                                        partial.as<float>(), rows, cols, rpc);
        } else {
            const dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads), static_cast<unsigned>(chunks));
            column_partials_kernel<T><<<grid, kThreads, 0, cuda_stream(stream())>>>(static_cast<const T*>(m),
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
                        cuda_stream(stream())>>>(partial, out, chunks, cols);
    GPT_CUDA_LAUNCH_CHECK("column sums");
}

void CudaBackend::do_bias_grad(const void* dy, float* dbias, std::int64_t rows, std::int64_t cols,
                               DType dtype) {
    column_sums(dy, dbias, rows, cols, dtype);
}

void CudaBackend::do_add(const void* a, const void* b, void* y, std::int64_t n, DType dtype) {
    if (n == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        add_kernel<T><<<grid_for(n), kThreads, 0, cuda_stream(stream())>>>(
            static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y), n);
    });
    GPT_CUDA_LAUNCH_CHECK("add");
}

void CudaBackend::do_accumulate_f32(const void* x, float* y, std::int64_t n, DType dtype) {
    if (n == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        accumulate_kernel<T><<<grid_for(n), kThreads, 0, cuda_stream(stream())>>>(static_cast<const T*>(x), y, n);
    });
    GPT_CUDA_LAUNCH_CHECK("accumulate_f32");
}

void CudaBackend::do_scale(void* x, float alpha, std::int64_t n, DType dtype) {
    if (n == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        scale_kernel<T><<<grid_for(n), kThreads, 0, cuda_stream(stream())>>>(static_cast<T*>(x), alpha, n);
    });
    GPT_CUDA_LAUNCH_CHECK("scale");
}

void CudaBackend::do_cast(const void* src, DType src_type, void* dst, DType dst_type,
                          std::int64_t n) {
    if (n == 0) return;
    // Through fp32, as the CPU backend: one correctly rounded step.
    dispatch(src_type, [&](auto stag) {
        using S = decltype(stag);
        dispatch(dst_type, [&](auto dtag) {
            using D = decltype(dtag);
            cast_kernel<S, D><<<grid_for(n), kThreads, 0, cuda_stream(stream())>>>(static_cast<const S*>(src),
                                                                     static_cast<D*>(dst), n);
        });
    });
    GPT_CUDA_LAUNCH_CHECK("cast");
}

}  // namespace gpt::cuda
