// The FP8 casts (issue 34) on CUDA, twins of cpu/fp8.cpp: the hardware's satfinite
// round-to-nearest-even conversion (fp8_codes.cuh; sm_89+ in one instruction, a bit-exact
// software path on sm_80), the transposed copy through a shared-memory tile so that both
// the reads of x and the writes of q_t are coalesced, the NaN-sticky amax, and (for an output
// gradient) its bias gradient's column sums in the same pass.
#include <cfloat>
#include <cstdint>
#include <memory>

#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_codes.cuh"

namespace gpt::cuda {

namespace {

constexpr int kTile = 32;     // a tile of x: kTile x kTile
constexpr int kTileRows = 8;  // threads per tile column: each thread does kTile / kTileRows rows

// Sums: also the column sums of x (a linear's bias gradient, cast_to_fp8_bias_grad): each
// block's over its row tiles into partial[blockIdx.y, c] (the threads of a column add their
// rows in a fixed order, then the kTileRows sums in order), summed over blockIdx.y in order
// by add_chunk_sums, so the result is the same every run.
template <typename T, bool Sums>
__global__ void cast_to_fp8_kernel(const T* __restrict__ x, std::int64_t rows, std::int64_t cols,
                                   bool e4m3, const float* __restrict__ scale,
                                   std::uint8_t* __restrict__ q, std::uint8_t* __restrict__ q_t,
                                   float* amax, float* __restrict__ partial) {
    __shared__ std::uint8_t tile[kTile][kTile + 4];
    const float s = *scale;
    const std::int64_t row_tiles = (rows + kTile - 1) / kTile;
    const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
    unsigned m = 0;
    float sum = 0.0f;
    for (std::int64_t rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
        const std::int64_t r0 = rt * kTile;
        // Read and quantise: threadIdx.x along the columns (coalesced reads and writes of q).
        for (int i = threadIdx.y; i < kTile; i += kTileRows) {
            const std::int64_t r = r0 + i, c = c0 + threadIdx.x;
            if (r < rows && c < cols) {
                const float v = ldf(x + r * cols + c);
                if (Sums) sum += v;
                m = max(m, abs_bits(v));
                const std::uint8_t code = to_fp8(v * s, e4m3);
                if (q) q[r * cols + c] = code;
                tile[i][threadIdx.x] = code;
            }
        }
        if (q_t) {
            __syncthreads();
            // Write the transpose: threadIdx.x along the rows of x, i.e. along q_t's rows.
            for (int j = threadIdx.y; j < kTile; j += kTileRows) {
                const std::int64_t c = c0 + j, r = r0 + threadIdx.x;
                if (r < rows && c < cols) q_t[c * rows + r] = tile[threadIdx.x][j];
            }
            __syncthreads();
        }
    }
    if (amax) amax_commit(m, amax);
    if (Sums) {
        __shared__ float sums[kTileRows][kTile];
        sums[threadIdx.y][threadIdx.x] = sum;
        __syncthreads();
        const std::int64_t c = c0 + threadIdx.x;
        if (threadIdx.y == 0 && c < cols) {
            float total = 0.0f;
            for (int y = 0; y < kTileRows; ++y) total += sums[y][threadIdx.x];
            partial[blockIdx.y * cols + c] = total;
        }
    }
}

template <typename T>
__global__ void amax_kernel(const T* __restrict__ x, std::int64_t n, float* amax) {
    unsigned m = 0;
    GPT_GRID_STRIDE(i, n) m = max(m, abs_bits(ldf(x + i)));
    amax_commit(m, amax);
}

// core/fp8_scaling.cpp's current_scale, for the device: 1 for an amax of 0, NaN or infinity,
// if_overflow where fp8_max / amax overflows. The emulator test checks it against the CPU.
__global__ void current_scales_kernel(const float* __restrict__ amax, float* __restrict__ scale,
                                      float* __restrict__ scale_inv, std::int64_t n, float max_value,
                                      float if_overflow) {
    GPT_GRID_STRIDE(i, n) {
        const float a = amax[i];
        float s = 1.0f;
        if (a > 0.0f && !isinf(a)) {
            s = max_value / a;
            if (isinf(s)) s = if_overflow;
        }
        scale[i] = s;
        scale_inv[i] = 1.0f / s;
    }
}

}  // namespace

void CudaBackend::launch_cast_to_fp8(const void* x, DType dtype, std::int64_t rows, std::int64_t cols,
                                     Fp8Format format, const float* scale, std::uint8_t* q,
                                     std::uint8_t* q_t, float* amax, float* dbias) {
    const std::int64_t col_tiles = (cols + kTile - 1) / kTile;
    GPT_REQUIRE(col_tiles <= INT32_MAX, DeviceError, "cast_to_fp8: ", cols, " columns exceed the grid");
    const std::int64_t chunks = std::min<std::int64_t>((rows + kTile - 1) / kTile, 65535);
    const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(chunks));
    // One fp32 partial per column and blockIdx.y: at most 1/16 of x's bytes at 2 bytes an element.
    std::unique_ptr<Scratch> partial;
    if (dbias) partial = std::make_unique<Scratch>(*this, static_cast<std::size_t>(chunks * cols) * sizeof(float));
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        const bool e4m3 = format == Fp8Format::E4M3;
        if (dbias)
            cast_to_fp8_kernel<T, true><<<grid, dim3(kTile, kTileRows), 0, cuda_stream(stream())>>>(
                static_cast<const T*>(x), rows, cols, e4m3, scale, q, q_t, amax, partial->as<float>());
        else
            cast_to_fp8_kernel<T, false><<<grid, dim3(kTile, kTileRows), 0, cuda_stream(stream())>>>(
                static_cast<const T*>(x), rows, cols, e4m3, scale, q, q_t, amax, nullptr);
    });
    GPT_CUDA_LAUNCH_CHECK("cast_to_fp8");
    if (dbias) add_chunk_sums(partial->as<float>(), dbias, chunks, cols);
}

void CudaBackend::do_cast_to_fp8(const void* x, DType dtype, std::int64_t rows, std::int64_t cols,
                                 Fp8Format format, const float* scale, std::uint8_t* q,
                                 std::uint8_t* q_t, float* amax) {
    launch_cast_to_fp8(x, dtype, rows, cols, format, scale, q, q_t, amax, nullptr);
}

void CudaBackend::do_cast_to_fp8_bias_grad(const void* dy, DType dtype, std::int64_t rows, std::int64_t cols,
                                           Fp8Format format, const float* scale, std::uint8_t* q,
                                           std::uint8_t* q_t, float* amax, float* dbias) {
    launch_cast_to_fp8(dy, dtype, rows, cols, format, scale, q, q_t, amax, dbias);
}

void CudaBackend::do_amax(const void* x, DType dtype, std::int64_t n, float* amax) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        amax_kernel<T><<<grid_for(n), kThreads, 0, cuda_stream(stream())>>>(static_cast<const T*>(x), n, amax);
    });
    GPT_CUDA_LAUNCH_CHECK("amax");
}

void CudaBackend::do_fp8_current_scales(const float* amax, float* scale, float* scale_inv,
                                        std::int64_t n, Fp8Format format, float if_overflow) {
    current_scales_kernel<<<grid_for(n), kThreads, 0, cuda_stream(stream())>>>(
        amax, scale, scale_inv, n, fp8_max(format), if_overflow);
    GPT_CUDA_LAUNCH_CHECK("fp8_current_scales");
}

}  // namespace gpt::cuda
