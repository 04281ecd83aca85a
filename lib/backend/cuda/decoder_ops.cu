// RMSNorm and SwiGLU (Llama-style layers) on the GPU: the CUDA half of cpu/decoder_ops.cpp.
// Statistics and arithmetic in fp32 over fp32/fp16/bf16 storage, as the layernorm kernels;
// the rope / grouped-QKV expansion is in qkv_expand.cu.
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/fp8_codes.cuh"
#include "backend/cuda/vec_access.cuh"
#include "backend/decoder_ops_common.hpp"

namespace gpt::cuda {

namespace {

// Rows go to blocks in a grid-stride loop, so any row count fits the grid limits.
inline unsigned rows_grid(std::int64_t rows) {
    return static_cast<unsigned>(std::max<std::int64_t>(1, std::min<std::int64_t>(rows, 65535)));
}

// Calls f(i, v) for the row's elements this thread owns: one 16-byte pack at a time when
// kVecRows (V = kVec<T> values), else one element (V = 1). Threads own the same columns
// in every pass over a row, so a thread reads back only what it wrote (dx may alias dy).
template <typename T, bool kVecRows>
struct RowAccess {
    static constexpr int V = kVecRows ? kVec<T> : 1;
    __device__ static void load(const T* p, float (&v)[V]) {
        if constexpr (kVecRows) {
            load_vec(p, v);
        } else {
            v[0] = ldf(p);
        }
    }
    __device__ static void store(T* p, const float (&v)[V]) {
        if constexpr (kVecRows) {
            store_vec(p, v);
        } else {
            stf(p, v[0]);
        }
    }
};

// ---- RMSNorm -----------------------------------------------------------------------------

// One block per row: rstd = 1 / sqrt(mean(x^2) + eps), y = x rstd (gamma + gamma_shift)
// (the shift 1 under --apply-layernorm-1p, else 0); with Q also the
// FP8 codes of y as stored (Backend::norm_forward_fp8).
template <typename T, bool kVecRows, bool Q>
__global__ void rms_fwd_kernel(const T* x, const T* gamma, T* y, float* rstd, std::int64_t rows,
                               std::int64_t cols, float eps, float gamma_shift, Fp8CodesArg codes, NormRows at) {
    using A = RowAccess<T, kVecRows>;
    constexpr int V = A::V;
    __shared__ float sh[32];
    const std::int64_t units = cols / V;
    unsigned m = 0;
    [[maybe_unused]] const float scale = Q ? *codes.scale : 1.0f;
    for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const std::int64_t base = norm_row(at, r) * cols;
        const T* xr = x + base;
        float ss = 0.0f;
        for (std::int64_t u = threadIdx.x; u < units; u += blockDim.x) {
            float v[V];
            A::load(xr + u * V, v);
#pragma unroll
            for (int i = 0; i < V; ++i) ss += v[i] * v[i];
        }
        const float rs = rsqrtf(block_sum(ss, sh) / static_cast<float>(cols) + eps);
        for (std::int64_t u = threadIdx.x; u < units; u += blockDim.x) {
            float v[V], g[V];
            A::load(xr + u * V, v);
            A::load(gamma + u * V, g);
#pragma unroll
            for (int i = 0; i < V; ++i) v[i] = v[i] * rs * (g[i] + gamma_shift);
            A::store(y + base + u * V, v);
            if constexpr (Q) store_codes<T, V>(v, scale, codes.e4m3, codes.q + r * cols + u * V, m);
        }
        if (threadIdx.x == 0) rstd[r] = rs;
    }
    if constexpr (Q)
        if (codes.amax) amax_commit(m, codes.amax);
}

// dgamma partials: pg[chunk, col] = sum over the chunk's rows of dy x rstd, in row order
// (then added in chunk order by add_chunk_sums: deterministic, as the bias gradients).
template <typename T, bool kVecRows>
__global__ void rms_param_partials_kernel(const T* dy, const T* x, const float* rstd, float* pg,
                                          std::int64_t rows, std::int64_t cols,
                                          std::int64_t rows_per_chunk, NormRows at) {
    using A = RowAccess<T, kVecRows>;
    constexpr int V = A::V;
    const std::int64_t u = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
    if (u >= cols / V) return;
    const std::int64_t r0 = blockIdx.y * rows_per_chunk;
    const std::int64_t r1 = min(rows, r0 + rows_per_chunk);
    float acc[V] = {};
    for (std::int64_t r = r0; r < r1; ++r) {
        float d[V], xv[V];
        const std::int64_t base = norm_row(at, r) * cols;
        A::load(dy + base + u * V, d);
        A::load(x + base + u * V, xv);
        const float rs = rstd[r];
#pragma unroll
        for (int i = 0; i < V; ++i) acc[i] += d[i] * (xv[i] * rs);
    }
#pragma unroll
    for (int i = 0; i < V; ++i) pg[blockIdx.y * cols + u * V + i] = acc[i];
}

// dx = dres + rstd (dy gamma - xhat mean(dy gamma xhat)), xhat = x rstd.
template <typename T, bool kVecRows>
__global__ void rms_dx_kernel(const T* dy, const T* x, const T* gamma, float gamma_shift, const float* rstd,
                              const T* dres, T* dx, std::int64_t rows, std::int64_t cols, NormRows at) {
    using A = RowAccess<T, kVecRows>;
    constexpr int V = A::V;
    __shared__ float sh[32];
    const std::int64_t units = cols / V;
    for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float rs = rstd[r];
        const std::int64_t base = norm_row(at, r) * cols;
        float c = 0.0f;
        for (std::int64_t u = threadIdx.x; u < units; u += blockDim.x) {
            float d[V], xv[V], g[V];
            A::load(dy + base + u * V, d);
            A::load(x + base + u * V, xv);
            A::load(gamma + u * V, g);
#pragma unroll
            for (int i = 0; i < V; ++i) c += d[i] * (g[i] + gamma_shift) * (xv[i] * rs);
        }
        c = block_sum(c, sh) / static_cast<float>(cols);
        for (std::int64_t u = threadIdx.x; u < units; u += blockDim.x) {
            float d[V], xv[V], g[V], out[V];
            A::load(dy + base + u * V, d);
            A::load(x + base + u * V, xv);
            A::load(gamma + u * V, g);
            if (dres) {
                A::load(dres + base + u * V, out);
            } else {
#pragma unroll
                for (int i = 0; i < V; ++i) out[i] = 0.0f;
            }
#pragma unroll
            for (int i = 0; i < V; ++i) out[i] += (d[i] * (g[i] + gamma_shift) - (xv[i] * rs) * c) * rs;
            A::store(dx + base + u * V, out);
        }
        // The next row's block_sum reuses sh: its leading barrier orders the reads above.
    }
}

// ---- SwiGLU ------------------------------------------------------------------------------

__device__ __forceinline__ float sigmoid_f(float v) { return 1.0f / (1.0f + expf(-v)); }

// f(r, u) for every row r and unit u < units of a row: blockIdx.y strides rows, x-threads
// stride the row's units (no 64-bit division per element).
template <typename F>
__device__ __forceinline__ void for_row_units(std::int64_t rows, std::int64_t units, F&& f) {
    for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y)
        for (std::int64_t u = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; u < units;
             u += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
            f(r, u);
}

// x [rows, 2 cols] = [gate, up]; y [rows, cols] = silu(gate) up; with Q also the FP8 codes
// of y as stored (fc2's input, Backend::swiglu_forward_fp8).
template <typename T, bool kVecRows, bool Q>
__global__ void swiglu_fwd_kernel(const T* x, T* y, std::int64_t rows, std::int64_t cols, Fp8CodesArg codes) {
    using A = RowAccess<T, kVecRows>;
    constexpr int V = A::V;
    unsigned m = 0;
    [[maybe_unused]] const float scale = Q ? *codes.scale : 1.0f;
    for_row_units(rows, cols / V, [&](std::int64_t r, std::int64_t u) {
        float g[V], up[V];
        A::load(x + r * 2 * cols + u * V, g);
        A::load(x + r * 2 * cols + cols + u * V, up);
#pragma unroll
        for (int i = 0; i < V; ++i) g[i] = g[i] * sigmoid_f(g[i]) * up[i];
        A::store(y + r * cols + u * V, g);
        if constexpr (Q) store_codes<T, V>(g, scale, codes.e4m3, codes.q + r * cols + u * V, m);
    });
    if constexpr (Q)
        if (codes.amax) amax_commit(m, codes.amax);
}

// dgate = dy up silu'(gate), silu'(g) = s (1 + g (1 - s)); dup = dy silu(gate).
template <typename T, bool kVecRows>
__global__ void swiglu_bwd_kernel(const T* dy, const T* x, T* dx, std::int64_t rows, std::int64_t cols) {
    using A = RowAccess<T, kVecRows>;
    constexpr int V = A::V;
    for_row_units(rows, cols / V, [&](std::int64_t r, std::int64_t u) {
        float d[V], g[V], up[V];
        A::load(dy + r * cols + u * V, d);
        A::load(x + r * 2 * cols + u * V, g);
        A::load(x + r * 2 * cols + cols + u * V, up);
#pragma unroll
        for (int i = 0; i < V; ++i) {
            const float s = sigmoid_f(g[i]);
            const float dg = d[i] * up[i] * s * (1.0f + g[i] * (1.0f - s));
            up[i] = d[i] * g[i] * s;
            g[i] = dg;
        }
        A::store(dx + r * 2 * cols + u * V, g);
        A::store(dx + r * 2 * cols + cols + u * V, up);
    });
}

// Calls f(std::bool_constant<vectorized>) for rows of `cols` over these pointers.
template <typename T, typename F>
void with_row_access(std::int64_t cols, std::initializer_list<const void*> ptrs, F&& f) {
    if (vectorizable<T>(cols, ptrs)) {
        f(std::true_type{});
    } else {
        f(std::false_type{});
    }
}

dim3 swiglu_grid(std::int64_t rows, std::int64_t units) {
    const std::int64_t bx = std::min<std::int64_t>((units + kThreads - 1) / kThreads, 64);
    return dim3(static_cast<unsigned>(std::max<std::int64_t>(1, bx)), rows_grid(rows));
}

}  // namespace

void CudaBackend::do_rmsnorm_forward(const void* x, const void* gamma, void* y, float* rstd,
                                  std::int64_t rows, std::int64_t cols, float eps, DType dtype,
                                  bool zero_centered_gamma, const NormRows& at) {
    launch_rms_forward(x, gamma, y, rstd, rows, cols, eps, dtype, nullptr, zero_centered_gamma, at);
}

void CudaBackend::launch_rms_forward(const void* x, const void* gamma, void* y, float* rstd, std::int64_t rows,
                              std::int64_t cols, float eps, DType dtype, const Fp8Codes* codes,
                              bool zero_centered_gamma, const NormRows& at) {
    if (rows == 0) return;
    const Fp8CodesArg arg = codes_arg(codes);
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        with_row_access<T>(cols, {x, gamma, y, arg.q}, [&](auto vec) {
            constexpr bool V = decltype(vec)::value;
            const int threads = row_threads(V ? cols / kVec<T> : cols, 1);
            auto launch = [&](auto with_codes) {
                constexpr bool Q = decltype(with_codes)::value;
                rms_fwd_kernel<T, V, Q><<<rows_grid(rows), threads, 0, cuda_stream(stream())>>>(
                    static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<T*>(y), rstd, rows, cols,
                    eps, zero_centered_gamma ? 1.0f : 0.0f, arg, at);
            };
            if (codes) launch(std::true_type{});
            else launch(std::false_type{});
        });
    });
    GPT_CUDA_LAUNCH_CHECK(codes ? "rmsnorm_forward (with FP8 codes)" : "rmsnorm_forward");
}

void CudaBackend::do_rmsnorm_backward(const void* dy, const void* x, const void* gamma,
                                   const float* rstd, const void* dresidual, void* dx,
                                   float* dgamma, std::int64_t rows, std::int64_t cols,
                                   DType dtype, bool zero_centered_gamma, const NormRows& at) {
    if (rows == 0) return;
    const std::int64_t rpc = rows_per_chunk(rows);
    const std::int64_t chunks = (rows + rpc - 1) / rpc;
    Scratch partial(*this, static_cast<std::size_t>(chunks * cols) * sizeof(float));
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        with_row_access<T>(cols, {dy, x, gamma, dresidual, dx}, [&](auto vec) {
            constexpr bool V = decltype(vec)::value;
            const std::int64_t units = V ? cols / kVec<T> : cols;
            // dgamma first: dx may alias dy.
            const int pthreads = row_threads(units, 1);
            const dim3 pgrid(static_cast<unsigned>((units + pthreads - 1) / pthreads),
                             static_cast<unsigned>(chunks));
            rms_param_partials_kernel<T, V><<<pgrid, pthreads, 0, cuda_stream(stream())>>>(
                static_cast<const T*>(dy), static_cast<const T*>(x), rstd, partial.as<float>(),
                rows, cols, rpc, at);
            rms_dx_kernel<T, V><<<rows_grid(rows), row_threads(units, 1), 0, cuda_stream(stream())>>>(
                static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(gamma),
                zero_centered_gamma ? 1.0f : 0.0f, rstd, static_cast<const T*>(dresidual), static_cast<T*>(dx),
                rows, cols, at);
        });
    });
    GPT_CUDA_LAUNCH_CHECK("rmsnorm_backward");
    add_chunk_sums(partial.as<float>(), dgamma, chunks, cols);
}

void CudaBackend::do_swiglu_forward(const void* x, void* y, std::int64_t rows, std::int64_t cols,
                                 DType dtype) {
    launch_swiglu_forward(x, y, rows, cols, dtype, nullptr);
}

void CudaBackend::do_swiglu_forward_fp8(const void* x, void* y, std::int64_t rows, std::int64_t cols, DType dtype,
                                        const Fp8Codes& codes) {
    launch_swiglu_forward(x, y, rows, cols, dtype, &codes);
}

void CudaBackend::launch_swiglu_forward(const void* x, void* y, std::int64_t rows, std::int64_t cols, DType dtype,
                                 const Fp8Codes* codes) {
    if (rows == 0) return;
    const Fp8CodesArg arg = codes_arg(codes);
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        with_row_access<T>(cols, {x, y, arg.q}, [&](auto vec) {
            constexpr bool V = decltype(vec)::value;
            auto launch = [&](auto with_codes) {
                constexpr bool Q = decltype(with_codes)::value;
                swiglu_fwd_kernel<T, V, Q><<<swiglu_grid(rows, V ? cols / kVec<T> : cols), kThreads, 0,
                                             cuda_stream(stream())>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                                      rows, cols, arg);
            };
            if (codes) launch(std::true_type{});
            else launch(std::false_type{});
        });
    });
    GPT_CUDA_LAUNCH_CHECK(codes ? "swiglu_forward (with FP8 codes)" : "swiglu_forward");
}

void CudaBackend::do_swiglu_backward(const void* dy, const void* x, void* dx, std::int64_t rows,
                                  std::int64_t cols, DType dtype) {
    if (rows == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        with_row_access<T>(cols, {dy, x, dx}, [&](auto vec) {
            constexpr bool V = decltype(vec)::value;
            swiglu_bwd_kernel<T, V><<<swiglu_grid(rows, V ? cols / kVec<T> : cols), kThreads, 0, cuda_stream(stream())>>>(
                static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<T*>(dx), rows, cols);
        });
    });
    GPT_CUDA_LAUNCH_CHECK("swiglu_backward");
}

}  // namespace gpt::cuda
