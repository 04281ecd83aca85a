// Word embeddings (vocab-parallel lookup and scatter-add) and learned position embeddings.
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_common.cuh"

namespace gpt::cuda {

namespace {

// out [s, b, h]: token (si, bi) is row t = si*b + bi; tokens are [b, s].
template <typename T>
__global__ void emb_fwd_kernel(const std::int32_t* tokens, const T* table, T* out, std::int64_t b,
                               std::int64_t s, std::int64_t h, std::int64_t vs, std::int64_t ve) {
    // A block per token row: the token id is looked up once, no division per element.
    GPT_ROW_LOOP(t, s * b) {
        const std::int64_t id = tokens[(t % b) * s + t / b];
        T* o = out + t * h;
        if (id >= vs && id < ve) {
            const T* row = table + (id - vs) * h;
            for (std::int64_t c = threadIdx.x; c < h; c += blockDim.x) o[c] = row[c];
        } else {
            for (std::int64_t c = threadIdx.x; c < h; c += blockDim.x) stf(o + c, 0.0f);
        }
    }
}

// Repeated tokens add into one table row: fp32 atomics (summation order, hence the last
// bits, may differ between runs; the CPU backend is the deterministic reference).
template <typename T>
__global__ void emb_bwd_kernel(const std::int32_t* tokens, const T* dout, float* dtable,
                               std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t vs,
                               std::int64_t ve) {
    GPT_ROW_LOOP(t, s * b) {
        const std::int64_t id = tokens[(t % b) * s + t / b];
        if (id < vs || id >= ve) continue;
        float* row = dtable + (id - vs) * h;
        for (std::int64_t c = threadIdx.x; c < h; c += blockDim.x) atomicAdd(row + c, ldf(dout + t * h + c));
    }
}

template <typename T>
__global__ void pos_fwd_kernel(const T* table, T* out, std::int64_t b, std::int64_t s,
                               std::int64_t h, std::int64_t first) {
    GPT_ROW_LOOP(t, s * b) {
        const T* row = table + (first + t / b) * h;
        T* o = out + t * h;
        for (std::int64_t c = threadIdx.x; c < h; c += blockDim.x) stf(o + c, ldf(o + c) + ldf(row + c));
    }
}

// One thread per (position, column) sums over the batch in order: deterministic.
template <typename T>
__global__ void pos_bwd_kernel(const T* dout, float* dtable, std::int64_t b, std::int64_t s,
                               std::int64_t h, std::int64_t first) {
    GPT_GRID_STRIDE(i, s * h) {
        const std::int64_t si = i / h, c = i % h;
        float acc = 0.0f;
        for (std::int64_t bi = 0; bi < b; ++bi) acc += ldf(dout + (si * b + bi) * h + c);
        dtable[(first + si) * h + c] += acc;
    }
}

}  // namespace

void CudaBackend::do_embedding_forward(const std::int32_t* tokens, const void* table, void* out,
                                       std::int64_t b, std::int64_t s, std::int64_t h,
                                       std::int64_t vocab_start, std::int64_t vocab_end, DType dtype) {
    if (b * s == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        emb_fwd_kernel<T><<<row_grid(b * s), kThreads, 0, cuda_stream(stream())>>>(
            tokens, static_cast<const T*>(table), static_cast<T*>(out), b, s, h, vocab_start, vocab_end);
    });
    GPT_CUDA_LAUNCH_CHECK("embedding_forward");
}

void CudaBackend::do_embedding_backward(const std::int32_t* tokens, const void* dout, float* dtable,
                                        std::int64_t b, std::int64_t s, std::int64_t h,
                                        std::int64_t vocab_start, std::int64_t vocab_end, DType dtype) {
    if (b * s == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        emb_bwd_kernel<T><<<row_grid(b * s), kThreads, 0, cuda_stream(stream())>>>(
            tokens, static_cast<const T*>(dout), dtable, b, s, h, vocab_start, vocab_end);
    });
    GPT_CUDA_LAUNCH_CHECK("embedding_backward");
}

void CudaBackend::do_position_embedding_forward(const void* table, void* out, std::int64_t b,
                                                std::int64_t s, std::int64_t h,
                                                std::int64_t first_position, DType dtype) {
    if (b * s == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        pos_fwd_kernel<T><<<row_grid(b * s), kThreads, 0, cuda_stream(stream())>>>(
            static_cast<const T*>(table), static_cast<T*>(out), b, s, h, first_position);
    });
    GPT_CUDA_LAUNCH_CHECK("position_embedding_forward");
}

void CudaBackend::do_position_embedding_backward(const void* dout, float* dtable, std::int64_t b,
                                                 std::int64_t s, std::int64_t h,
                                                 std::int64_t first_position, DType dtype) {
    if (b * s == 0) return;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        pos_bwd_kernel<T><<<grid_for(s * h), kThreads, 0, cuda_stream(stream())>>>(
            static_cast<const T*>(dout), dtable, b, s, h, first_position);
    });
    GPT_CUDA_LAUNCH_CHECK("position_embedding_backward");
}

}  // namespace gpt::cuda
