// The FP8 casts (issue 34) on CUDA, twins of cpu/fp8.cpp: the hardware's satfinite
// round-to-nearest-even conversion (fp8_codes.cuh; sm_89+ in one instruction, a bit-exact
// software path on sm_80), two cast kernels (the vectorised one and the element-wise one it
// replaced, fp8_cast_kernel.hpp), the transposed copy through a shared-memory tile so that both
// the reads of x and the writes of q_t are coalesced, the NaN-sticky amax, and (for an output
// gradient) its bias gradient's column sums in the same pass.
#include <cfloat>
#include <cstdint>
#include <memory>

#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_cast_kernel.hpp"
#include "backend/cuda/fp8_codes.cuh"
#include "backend/cuda/vec_access.cuh"
#include "core/environment.hpp"

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

// The vectorised cast (GPT_CUDA_FP8_CAST=vec, the default): a block of kVThreads threads
// takes 64 x 64 tiles of x, each thread 16-byte loads of kVec<T> elements in one column pack
// of the tile (rows tr, tr + RS, ...), their codes stored as one 4- or 8-byte word; the
// transpose goes through a shared tile whose 64 columns the block writes as 8-byte words of
// 8 rows each (8 threads a column: 64 contiguous bytes of q_t). Needs cols a multiple of
// kVec<T>, x 16-byte aligned and q kVec<T>-byte aligned (the host checks); t8: q_t's rows
// take 8-byte stores (rows a multiple of 8, q_t 8-byte aligned), else bytes. Sums as above:
// a thread's column pack over its rows, then the RS threads of a pack in order. Dgelu: x is
// d(GELU's output) and the tensor cast is x * GELU'(pre) rounded to T (cast_to_fp8_dgelu).
constexpr int kVTile = 64;
constexpr int kVThreads = 256;
constexpr int kVPitch = kVTile + 4;  // 17 words a row: the transposed reads meet 2-way bank conflicts at most

template <int N>
struct alignas(N) CodeWord {
    std::uint8_t b[N];
};

template <typename T, bool Sums, bool Dgelu>
__global__ void __launch_bounds__(kVThreads)
    cast_to_fp8_vec_kernel(const T* __restrict__ x, const T* __restrict__ pre, bool tanh_approx,
                           std::int64_t rows, std::int64_t cols, bool e4m3,
                           const float* __restrict__ scale, std::uint8_t* __restrict__ q,
                           std::uint8_t* __restrict__ q_t, bool t8, float* amax, float* __restrict__ partial) {
    constexpr int V = kVec<T>;          // elements a load: 8 (16-bit) or 4 (fp32)
    constexpr int VR = kVTile / V;      // loads a tile row
    constexpr int RS = kVThreads / VR;  // tile rows one pass of the block covers
    __shared__ __align__(16) std::uint8_t tile[kVTile][kVPitch];
    const float s = *scale;
    const int vc = static_cast<int>(threadIdx.x) % VR, tr = static_cast<int>(threadIdx.x) / VR;
    const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kVTile;
    const std::int64_t c = c0 + vc * V;
    const bool col_in = c < cols;  // cols % V == 0: the whole pack is in, or none of it
    const std::int64_t row_tiles = (rows + kVTile - 1) / kVTile;
    unsigned m = 0;
    float sum[V] = {};
    for (std::int64_t rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
        const std::int64_t r0 = rt * kVTile;
#pragma unroll
        for (int pass = 0; pass < kVTile / RS; ++pass) {
            const int i = tr + pass * RS;
            const std::int64_t r = r0 + i;
            if (!col_in || r >= rows) continue;
            float v[V];
            load_vec(x + r * cols + c, v);
            if (Dgelu) {
                // GELU's backward as gelu_backward computes it, stored in T: what its cast reads.
                float p[V];
                load_vec(pre + r * cols + c, p);
#pragma unroll
                for (int j = 0; j < V; ++j) {
                    T stored;
                    stf(&stored, v[j] * gelu_grad_f(p[j], tanh_approx));
                    v[j] = ldf(&stored);
                }
            }
            CodeWord<V> w;
#pragma unroll
            for (int j = 0; j < V; ++j) {
                if (Sums) sum[j] += v[j];
                m = max(m, abs_bits(v[j]));
                w.b[j] = to_fp8(v[j] * s, e4m3);
            }
            if (q) *reinterpret_cast<CodeWord<V>*>(q + r * cols + c) = w;
            if (q_t) {
                // 4-byte words: the tile's rows are 4-byte aligned (pitch 68), packs at 4V.
#pragma unroll
                for (int j = 0; j < V; j += 4)
                    *reinterpret_cast<CodeWord<4>*>(&tile[i][vc * V + j]) =
                        CodeWord<4>{{w.b[j], w.b[j + 1], w.b[j + 2], w.b[j + 3]}};
            }
        }
        if (q_t) {
            __syncthreads();
            for (int k = static_cast<int>(threadIdx.x); k < kVTile * 8; k += kVThreads) {
                const int j = k / 8, g = k % 8;
                const std::int64_t cc = c0 + j, rr = r0 + 8 * g;
                if (cc >= cols || rr >= rows) continue;
                CodeWord<8> w;
#pragma unroll
                for (int e = 0; e < 8; ++e) w.b[e] = tile[8 * g + e][j];
                std::uint8_t* dst = q_t + cc * rows + rr;
                if (t8 && rr + 8 <= rows) {
                    *reinterpret_cast<CodeWord<8>*>(dst) = w;
                } else {
                    for (int e = 0; e < 8 && rr + e < rows; ++e) dst[e] = w.b[e];
                }
            }
            __syncthreads();
        }
    }
    if (amax) amax_commit(m, amax);
    if (Sums) {
        __shared__ float sums[RS][kVTile];
#pragma unroll
        for (int j = 0; j < V; ++j) sums[tr][vc * V + j] = sum[j];
        __syncthreads();
        const std::int64_t col = c0 + threadIdx.x;
        if (threadIdx.x < kVTile && col < cols) {
            float total = 0.0f;
            for (int y = 0; y < RS; ++y) total += sums[y][threadIdx.x];
            partial[blockIdx.y * cols + col] = total;
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

bool fp8_cast_tile_kernel() { return kernel_switch<env::cuda_fp8_cast_tile>(); }
void set_fp8_cast_tile_kernel(bool on) { kernel_switch<env::cuda_fp8_cast_tile>() = on; }

bool CudaBackend::launch_cast_to_fp8(const void* x, DType dtype, std::int64_t rows, std::int64_t cols,
                                     Fp8Format format, const float* scale, std::uint8_t* q,
                                     std::uint8_t* q_t, float* amax, float* dbias, const void* pre,
                                     bool tanh_approx) {
    bool launched = false;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        const bool e4m3 = format == Fp8Format::E4M3;
        const auto at = [](const void* p, std::uintptr_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; };
        const bool vec = !fp8_cast_tile_kernel() && vectorizable<T>(cols, {x, pre}) && at(q, kVec<T>);
        if (pre && !vec) return;  // GELU's backward only in the vectorised kernel
        const std::int64_t tile = vec ? kVTile : kTile;
        const std::int64_t col_tiles = (cols + tile - 1) / tile;
        GPT_REQUIRE(col_tiles <= INT32_MAX, DeviceError, "cast_to_fp8: ", cols, " columns exceed the grid");
        const std::int64_t chunks = std::min<std::int64_t>((rows + tile - 1) / tile, 65535);
        const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(chunks));
        // One fp32 partial per column and blockIdx.y: at most 1/16 of x's bytes at 2 bytes an element.
        std::unique_ptr<Scratch> partial;
        if (dbias) partial = std::make_unique<Scratch>(*this, static_cast<std::size_t>(chunks * cols) * sizeof(float));
        float* const p = dbias ? partial->as<float>() : nullptr;
        const auto* xt = static_cast<const T*>(x);
        cudaStream_t st = cuda_stream(stream());
        if (vec) {
            const bool t8 = rows % 8 == 0 && at(q_t, 8);
            const auto* pt = static_cast<const T*>(pre);
            if (pre && dbias)
                cast_to_fp8_vec_kernel<T, true, true><<<grid, kVThreads, 0, st>>>(xt, pt, tanh_approx, rows, cols, e4m3,
                                                                                  scale, q, q_t, t8, amax, p);
            else if (pre)
                cast_to_fp8_vec_kernel<T, false, true><<<grid, kVThreads, 0, st>>>(xt, pt, tanh_approx, rows, cols, e4m3,
                                                                                   scale, q, q_t, t8, amax, p);
            else if (dbias)
                cast_to_fp8_vec_kernel<T, true, false><<<grid, kVThreads, 0, st>>>(xt, nullptr, false, rows, cols, e4m3,
                                                                                   scale, q, q_t, t8, amax, p);
            else
                cast_to_fp8_vec_kernel<T, false, false><<<grid, kVThreads, 0, st>>>(xt, nullptr, false, rows, cols, e4m3,
                                                                                    scale, q, q_t, t8, amax, p);
        } else if (dbias) {
            cast_to_fp8_kernel<T, true><<<grid, dim3(kTile, kTileRows), 0, st>>>(xt, rows, cols, e4m3, scale, q, q_t, amax, p);
        } else {
            cast_to_fp8_kernel<T, false><<<grid, dim3(kTile, kTileRows), 0, st>>>(xt, rows, cols, e4m3, scale, q, q_t, amax, p);
        }
        GPT_CUDA_LAUNCH_CHECK("cast_to_fp8");
        if (dbias) add_chunk_sums(p, dbias, chunks, cols);
        launched = true;
    });
    return launched;
}

void CudaBackend::do_cast_to_fp8(const void* x, DType dtype, std::int64_t rows, std::int64_t cols,
                                 Fp8Format format, const float* scale, std::uint8_t* q,
                                 std::uint8_t* q_t, float* amax) {
    launch_cast_to_fp8(x, dtype, rows, cols, format, scale, q, q_t, amax, nullptr);
}

void CudaBackend::do_cast_to_fp8_dgelu(void* dy, const void* pre, bool tanh_approx, DType dtype, std::int64_t rows,
                                       std::int64_t cols, Fp8Format format, const float* scale, std::uint8_t* q,
                                       std::uint8_t* q_t, float* amax, float* dbias) {
    // The vectorised kernel reads dy and pre in its pass; elsewhere (GPT_CUDA_FP8_CAST=tile,
    // or widths it does not take) GELU's backward into dy, then the cast.
    if (!launch_cast_to_fp8(dy, dtype, rows, cols, format, scale, q, q_t, amax, dbias, pre, tanh_approx))
        Backend::do_cast_to_fp8_dgelu(dy, pre, tanh_approx, dtype, rows, cols, format, scale, q, q_t, amax, dbias);
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
