// Attention entry points (flash goes to attention_flash.cu) and the plain kernel.
// Plain causal attention on the GPU: batched cuBLASLt GEMMs straight on Megatron's grouped
// qkv [s, b, ng, np/ng + 2, hn]: per query head i of a group, one GEMM batched over the
// (batch, group) pairs (their q/k/v rows are (np/ng + 2)*hn apart, rows b*ng*(np/ng + 2)*hn
// apart: a strided batch, no copies, each group's K/V read in place), and a row softmax
// kernel. A group's dK/dV: head 0's products write it, the next heads' add (beta = 1), in
// head order. Saves the fp32
// probabilities [b, np, s, s] as the CPU plain kernel does; dropout masks come from
// philox(seed, offset + ((pair*s + i)*s + j)), the CPU's indexing, so masks are identical.
// Document masking (AttentionArgs::doc_start) lives in the softmax kernels alone: the GEMMs
// compute every score, row i keeps keys [doc_start, i] and writes exact zeros elsewhere, so
// the products through the masked probabilities add nothing.
#include <cmath>

#include "backend/cuda/attention_flash.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_common.cuh"
#include "core/philox.hpp"

namespace gpt::cuda {

namespace {

struct Shape {
    std::int64_t s, b, np, hn, pairs, qpg, kv_pairs, group, ldq, ldo;
    float scale;

    explicit Shape(const AttentionArgs& a)
        : s(a.s), b(a.b), np(a.np), hn(a.hn), pairs(a.b * a.np), qpg(a.heads_per_group),
          kv_pairs(a.b * a.np / a.heads_per_group), group((a.heads_per_group + 2) * a.hn),
          ldq(kv_pairs * group), ldo(a.b * a.np * a.hn),
          scale(a.softmax_scale != 0.0f ? a.softmax_scale : 1.0f / std::sqrt(static_cast<float>(a.hn))) {}
};

// The first key row `row` (pair * s + i) attends to: doc_start of its sample (pair / np), or
// 0 without document masking.
__device__ __forceinline__ std::int64_t row_first_key(const std::int32_t* doc_start, std::int64_t row,
                                                      std::int64_t s, std::int64_t np) {
    return doc_start != nullptr ? doc_start[row / s / np * s + row % s] : 0;
}

// Calls f(j, mult) for every column lo <= j <= i of row i (causal, and within its document),
// mult the dropout multiplier of element (row_base + j); threads of the block split the row
// by Philox block (4 elements), so each 10-round Philox is evaluated once.
template <typename F>
__device__ __forceinline__ void for_row_masked(std::int64_t lo, std::int64_t i, std::uint64_t row_base, bool drop,
                                               std::uint32_t thr, float keep_scale,
                                               std::uint64_t seed, F&& f) {
    const std::uint64_t from = row_base + static_cast<std::uint64_t>(lo);
    const std::uint64_t first = from >> 2, last = (row_base + static_cast<std::uint64_t>(i)) >> 2;
    for (std::uint64_t blk = first + threadIdx.x; blk <= last; blk += blockDim.x) {
        std::uint32_t bits[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
        if (drop) {
            const Philox4x32 r = philox4x32_10(static_cast<std::uint32_t>(blk),
                                               static_cast<std::uint32_t>(blk >> 32), 0u, 0u, seed);
            for (int q = 0; q < 4; ++q) bits[q] = r.v[q];
        }
        for (int q = 0; q < 4; ++q) {
            const std::uint64_t e = blk * 4 + q;
            if (e < from || e > row_base + static_cast<std::uint64_t>(i)) continue;
            f(static_cast<std::int64_t>(e - row_base), drop ? (bits[q] >= thr ? keep_scale : 0.0f) : 1.0f);
        }
    }
}

// One block per score row (pair, i): causal softmax of the fp32 scores in place over keys
// [lo, i] (lo: the row's doc_start, 0 without document masking; zeros elsewhere, so the max
// is over at least the diagonal and stays finite) and pd = dropout(p) in the GEMM dtype for
// the context product.
template <typename T>
__global__ void softmax_fwd_kernel(float* probs, T* pd, std::int64_t s, std::int64_t rows,
                                   bool drop, std::uint32_t thr, float keep_scale,
                                   std::uint64_t seed, std::uint64_t offset, const std::int32_t* doc_start,
                                   std::int64_t np) {
    __shared__ float sh[32];
    for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const std::int64_t i = row % s, lo = row_first_key(doc_start, row, s, np);
        float* p = probs + row * s;
        T* d = pd + row * s;
        float m = -INFINITY;
        for (std::int64_t j = lo + threadIdx.x; j <= i; j += blockDim.x) m = fmaxf(m, p[j]);
        m = block_max(m, sh);
        float sum = 0.0f;
        for (std::int64_t j = lo + threadIdx.x; j <= i; j += blockDim.x) {
            const float e = expf(p[j] - m);
            p[j] = e;
            sum += e;
        }
        const float inv = 1.0f / block_sum(sum, sh);
        __syncthreads();  // every p[j] = e is written before any thread rescales it
        for (std::int64_t j = threadIdx.x; j < s; j += blockDim.x) {
            if (j >= lo && j <= i) continue;
            p[j] = 0.0f;
            stf(d + j, 0.0f);
        }
        for_row_masked(lo, i, offset + static_cast<std::uint64_t>(row * s), drop, thr, keep_scale, seed,
                       [&](std::int64_t j, float mult) {
                           const float pj = p[j] * inv;
                           p[j] = pj;
                           stf(d + j, pj * mult);
                       });
        __syncthreads();
    }
}

// Backward through dropout and softmax for one row: dp (fp32, = dout v^T) becomes
// ds = p * (dp*mask - rowsum(p * dp*mask)) in the GEMM dtype, and pd = dropout(p) again.
// Keys outside [lo, i] (the causal and document masks) get ds = pd = 0.
template <typename T>
__global__ void softmax_bwd_kernel(const float* probs, const float* dp, T* ds, T* pd, std::int64_t s,
                                   std::int64_t rows, bool drop, std::uint32_t thr,
                                   float keep_scale, std::uint64_t seed, std::uint64_t offset,
                                   const std::int32_t* doc_start, std::int64_t np) {
    __shared__ float sh[32];
    for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const std::int64_t i = row % s, lo = row_first_key(doc_start, row, s, np);
        const float* p = probs + row * s;
        const float* g = dp + row * s;
        const std::uint64_t base = offset + static_cast<std::uint64_t>(row * s);
        float dot = 0.0f;
        for_row_masked(lo, i, base, drop, thr, keep_scale, seed,
                       [&](std::int64_t j, float mult) { dot += p[j] * g[j] * mult; });
        dot = block_sum(dot, sh);
        // ds may be dp itself (fp32): each element is read, then written, by one thread.
        for_row_masked(lo, i, base, drop, thr, keep_scale, seed, [&](std::int64_t j, float mult) {
            stf(ds + row * s + j, p[j] * (g[j] * mult - dot));
            stf(pd + row * s + j, p[j] * mult);
        });
        for (std::int64_t j = threadIdx.x; j < s; j += blockDim.x) {
            if (j >= lo && j <= i) continue;
            stf(ds + row * s + j, 0.0f);
            stf(pd + row * s + j, 0.0f);
        }
        __syncthreads();
    }
}

inline unsigned rows_grid(std::int64_t rows) {
    return static_cast<unsigned>(std::min<std::int64_t>(rows, 1 << 20));
}

}  // namespace

// A valid configuration can reach this limit (--kv-channels), so it names the option.
void CudaBackend::check_attention_limits(const AttentionArgs& a) const {
    GPT_REQUIRE(!a.flash || a.hn <= kMaxFlashHeadDim, DeviceError,
                "not implemented on CUDA: flash attention with head dim ", a.hn, " (at most ",
                kMaxFlashHeadDim, "). HINT: run without --use-flash-attn; the plain CUDA "
                "attention computes the same result with O(s^2) memory");
}

void CudaBackend::do_attention_forward(const AttentionArgs& a, const void* qkv, void* out, void* saved) {
    if (a.flash) {
        flash_forward(a, qkv, out, static_cast<float*>(saved), stream());
        return;
    }
    const Shape sh(a);
    const std::size_t esz = dtype_size(a.dtype);
    const char* q = static_cast<const char*>(qkv);
    float* probs = static_cast<float*>(saved);
    const std::int64_t ss = sh.s * sh.s;
    // scores[pair] = scale * q k^T  (fp32, [s, s]), per head of the groups
    for (std::int64_t h = 0; h < sh.qpg; ++h) {
        GemmArgs g;
        g.trans_b = true;
        g.m = sh.s; g.n = sh.s; g.k = sh.hn;
        g.a = q + h * sh.hn * esz; g.lda = sh.ldq; g.stride_a = sh.group;
        g.b = q + sh.qpg * sh.hn * esz; g.ldb = sh.ldq; g.stride_b = sh.group;
        g.c = probs + h * ss; g.ldc = sh.s; g.stride_c = sh.qpg * ss;
        g.alpha = sh.scale;
        g.dtype = a.dtype; g.c_dtype = DType::F32;
        g.batch = sh.kv_pairs;
        gemm(g);
    }

    Scratch pd(*this, static_cast<std::size_t>(sh.pairs * sh.s * sh.s) * esz);
    const std::int64_t rows = sh.pairs * sh.s;
    const bool drop = a.dropout > 0.0f;
    dispatch(a.dtype, [&](auto tag) {
        using T = decltype(tag);
        softmax_fwd_kernel<T><<<rows_grid(rows), 128, 0, cuda_stream(stream())>>>(
            probs, pd.as<T>(), sh.s, rows, drop, dropout_threshold(a.dropout),
            drop ? 1.0f / (1.0f - a.dropout) : 1.0f, a.seed, a.offset, a.doc_start, sh.np);
    });
    GPT_CUDA_LAUNCH_CHECK("attention_forward (softmax)");

    // out[pair] = dropout(p) v
    for (std::int64_t h = 0; h < sh.qpg; ++h) {
        GemmArgs o;
        o.m = sh.s; o.n = sh.hn; o.k = sh.s;
        o.a = static_cast<char*>(pd.get()) + h * ss * esz; o.lda = sh.s; o.stride_a = sh.qpg * ss;
        o.b = q + (sh.qpg + 1) * sh.hn * esz; o.ldb = sh.ldq; o.stride_b = sh.group;
        o.c = static_cast<char*>(out) + h * sh.hn * esz; o.ldc = sh.ldo; o.stride_c = sh.qpg * sh.hn;
        o.dtype = a.dtype; o.c_dtype = a.dtype;
        o.batch = sh.kv_pairs;
        gemm(o);
    }
}

void CudaBackend::do_attention_backward(const AttentionArgs& a, const void* qkv, const void* out,
                                        const void* saved, const void* dout, void* dqkv) {
    if (a.flash) {
        Scratch delta(*this, static_cast<std::size_t>(a.b * a.np * a.s) * sizeof(float));  // per query head
        const bool tc = flash_uses_tensor_cores(a, {qkv, out, dout, dqkv});
        Scratch dq(*this, tc ? flash_dq_scratch_floats(a.s, a.b * a.np, a.hn) * sizeof(float) : 0);
        flash_backward(a, qkv, out, static_cast<const float*>(saved), dout, dqkv, delta.as<float>(),
                       tc ? dq.as<float>() : nullptr, stream());
        return;
    }
    const Shape sh(a);
    const std::size_t esz = dtype_size(a.dtype);
    const char* q = static_cast<const char*>(qkv);
    char* dq = static_cast<char*>(dqkv);
    const std::size_t ss = static_cast<std::size_t>(sh.pairs * sh.s * sh.s);
    const std::int64_t rows = sh.pairs * sh.s;
    const bool drop = a.dropout > 0.0f;

    const std::int64_t s2 = sh.s * sh.s;
    // dp[pair] = dout v^T (fp32)
    Scratch dp(*this, ss * sizeof(float));
    for (std::int64_t h = 0; h < sh.qpg; ++h) {
        GemmArgs g;
        g.trans_b = true;
        g.m = sh.s; g.n = sh.s; g.k = sh.hn;
        g.a = static_cast<const char*>(dout) + h * sh.hn * esz; g.lda = sh.ldo; g.stride_a = sh.qpg * sh.hn;
        g.b = q + (sh.qpg + 1) * sh.hn * esz; g.ldb = sh.ldq; g.stride_b = sh.group;
        g.c = dp.as<float>() + h * s2; g.ldc = sh.s; g.stride_c = sh.qpg * s2;
        g.dtype = a.dtype; g.c_dtype = DType::F32;
        g.batch = sh.kv_pairs;
        gemm(g);
    }

    // ds in the GEMM dtype (in place over dp for fp32), pd = dropout(p) for dV.
    std::unique_ptr<Scratch> ds16;
    void* ds = dp.get();
    if (a.dtype != DType::F32) {
        ds16 = std::make_unique<Scratch>(*this, ss * esz);
        ds = ds16->get();
    }
    Scratch pd(*this, ss * esz);
    dispatch(a.dtype, [&](auto tag) {
        using T = decltype(tag);
        softmax_bwd_kernel<T><<<rows_grid(rows), 128, 0, cuda_stream(stream())>>>(
            static_cast<const float*>(saved), dp.as<float>(), static_cast<T*>(ds), pd.as<T>(), sh.s,
            rows, drop, dropout_threshold(a.dropout), drop ? 1.0f / (1.0f - a.dropout) : 1.0f,
            a.seed, a.offset, a.doc_start, sh.np);
    });
    GPT_CUDA_LAUNCH_CHECK("attention_backward (softmax)");

    // Three products per head h into dqkv [s, b, ng, np/ng + 2, hn], batched over the kv
    // pairs: dq into the head's own part, dk and dv into the group's (part qpg, qpg + 1),
    // written by head 0 and added to by the others (beta = 1, in head order).
    auto product = [&](std::int64_t h, bool trans_a, const void* A, const void* B, std::int64_t part,
                       float alpha, std::int64_t ldb, std::int64_t stride_b, bool accumulate) {
        GemmArgs p;
        p.trans_a = trans_a;
        p.m = sh.s; p.n = sh.hn; p.k = sh.s;
        p.a = static_cast<const char*>(A) + h * s2 * esz; p.lda = sh.s; p.stride_a = sh.qpg * s2;
        p.b = B; p.ldb = ldb; p.stride_b = stride_b;
        p.c = dq + part * sh.hn * esz; p.ldc = sh.ldq; p.stride_c = sh.group;
        p.alpha = alpha;
        p.beta = accumulate ? 1.0f : 0.0f;
        p.dtype = a.dtype; p.c_dtype = a.dtype;
        p.batch = sh.kv_pairs;
        gemm(p);
    };
    for (std::int64_t h = 0; h < sh.qpg; ++h) {
        const char* dout_h = static_cast<const char*>(dout) + h * sh.hn * esz;
        const char* q_h = q + h * sh.hn * esz;
        const std::int64_t kpart = sh.qpg;
        product(h, true, pd.get(), dout_h, kpart + 1, 1.0f, sh.ldo, sh.qpg * sh.hn, h > 0);  // dv += pd^T dout
        product(h, false, ds, q + kpart * sh.hn * esz, h, sh.scale, sh.ldq, sh.group, false);  // dq = s*ds k
        product(h, true, ds, q_h, kpart, sh.scale, sh.ldq, sh.group, h > 0);                   // dk += s*ds^T q
    }
}

}  // namespace gpt::cuda
