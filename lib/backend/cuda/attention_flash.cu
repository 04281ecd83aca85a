// Flash attention on the GPU (Dao et al. 2022): tiled online softmax, the s x s matrix never
// exists; forward saves the row log-sum-exp [b, np, s] (the CPU flash layout), backward
// recomputes probabilities from it with D_i = rowsum(dO_i * O_i). Dropout masks use the
// CPU's indexing, philox(seed, offset + (pair*s + i)*s + j), so all four kernels (CPU/GPU,
// plain/flash) drop the same elements.
//
// Two implementations behind the same entry points:
//  - tensor-core kernels (fp16/bf16, head dims 64, 80, 96, 128, 16-byte aligned tensors):
//    64-row blocks of 4 warps, WMMA 16x16x16 products with fp32 accumulation for Q K^T,
//    P V, dO V^T, P^T dO, dS^T Q and dS K; softmax statistics in fp32 registers, the
//    output accumulator in shared memory (rescaled per row as the running max moves). The
//    backward pass walks query tiles per 64-key block (FlashAttention-2's order): dK and dV
//    stay in registers, dQ is summed over key blocks with fp32 atomics into a scratch.
//  - simple kernels (every dtype and head dim up to 128): one thread per query (or key)
//    row with fp32 math on CUDA cores. They are the fallback and the tensor-core kernels'
//    reference; GPT_CUDA_FLASH=simple selects them for every call.
#include <mma.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "backend/cuda/attention_flash.hpp"
#include "backend/cuda/cuda_common.cuh"
#include "core/philox.hpp"

namespace gpt::cuda {

namespace {

constexpr int kRows = 64;   // rows (threads) per block
constexpr int kTile = 32;   // staged rows per shared-memory tile
constexpr int kMaxHn = kMaxFlashHeadDim;

struct Params {
    std::int64_t s, pairs, hn, ldq, ldo;
    float scale;
    bool drop;
    std::uint32_t thr;
    float keep_scale;
    std::uint64_t seed, offset;
};

__device__ __forceinline__ float mult_of(const Params& P, std::int64_t pair, std::int64_t i,
                                         std::int64_t j) {
    if (!P.drop) return 1.0f;
    const std::uint64_t idx = P.offset + static_cast<std::uint64_t>((pair * P.s + i) * P.s + j);
    return dropout_keep(P.seed, idx, P.thr) ? P.keep_scale : 0.0f;
}

// Stages rows [r0, r0 + kTile) of one third (q, k or v: `part`) of qkv, or of a
// [s, pairs, hn] tensor when `ld_row` is ldo, as fp32 into tile[kTile][kMaxHn].
template <typename T>
__device__ void stage(float (*tile)[kMaxHn], const T* base, std::int64_t r0, std::int64_t s,
                      std::int64_t ld_row, std::int64_t hn) {
    for (std::int64_t e = threadIdx.x; e < kTile * hn; e += blockDim.x) {
        const std::int64_t r = e / hn, c = e % hn;
        tile[r][c] = r0 + r < s ? ldf(base + (r0 + r) * ld_row + c) : 0.0f;
    }
}

template <typename T>
__global__ void __launch_bounds__(kRows) flash_fwd_kernel(Params P, const T* qkv, T* out, float* lse) {
    __shared__ float ks[kTile][kMaxHn];
    __shared__ float vs[kTile][kMaxHn];
    const std::int64_t pair = blockIdx.y, i0 = static_cast<std::int64_t>(blockIdx.x) * kRows;
    const std::int64_t i = i0 + threadIdx.x, hn = P.hn;
    const T* qb = qkv + pair * 3 * hn;
    float q[kMaxHn], acc[kMaxHn];
    for (std::int64_t c = 0; c < hn; ++c) {
        q[c] = i < P.s ? ldf(qb + i * P.ldq + c) * P.scale : 0.0f;
        acc[c] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const std::int64_t last = min(P.s, i0 + kRows) - 1;  // causal: no key beyond the last row
    for (std::int64_t j0 = 0; j0 <= last; j0 += kTile) {
        __syncthreads();
        stage(ks, qb + hn, j0, P.s, P.ldq, hn);
        stage(vs, qb + 2 * hn, j0, P.s, P.ldq, hn);
        __syncthreads();
        if (i >= P.s || j0 > i) continue;
        const int nj = static_cast<int>(min(static_cast<std::int64_t>(kTile), i - j0 + 1));
        float sc[kTile];
        float tmax = m;
        for (int jj = 0; jj < nj; ++jj) {
            float d = 0.0f;
            for (std::int64_t c = 0; c < hn; ++c) d += q[c] * ks[jj][c];
            sc[jj] = d;
            tmax = fmaxf(tmax, d);
        }
        const float alpha = expf(m - tmax);  // 0 on the first tile (m = -inf)
        l *= alpha;
        for (std::int64_t c = 0; c < hn; ++c) acc[c] *= alpha;
        for (int jj = 0; jj < nj; ++jj) {
            const float p = expf(sc[jj] - tmax);
            l += p;
            const float pm = p * mult_of(P, pair, i, j0 + jj);
            if (pm != 0.0f)
                for (std::int64_t c = 0; c < hn; ++c) acc[c] += pm * vs[jj][c];
        }
        m = tmax;
    }
    if (i >= P.s) return;
    const float inv = 1.0f / l;
    T* o = out + i * P.ldo + pair * hn;
    for (std::int64_t c = 0; c < hn; ++c) stf(o + c, acc[c] * inv);
    lse[pair * P.s + i] = m + logf(l);
}

// D[pair*s + i] = dO_i . O_i
template <typename T>
__global__ void flash_delta_kernel(Params P, const T* out, const T* dout, float* D) {
    const std::int64_t n = P.pairs * P.s;
    for (std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; r < n;
         r += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t pair = r / P.s, i = r % P.s;
        const std::int64_t at = i * P.ldo + pair * P.hn;
        float d = 0.0f;
        for (std::int64_t c = 0; c < P.hn; ++c) d += ldf(dout + at + c) * ldf(out + at + c);
        D[r] = d;
    }
}

// dK, dV: one thread per key row j, query tiles i >= j staged in shared memory.
template <typename T>
__global__ void __launch_bounds__(kRows) flash_dkdv_kernel(Params P, const T* qkv, const T* dout,
                                                           const float* lse, const float* D, T* dqkv) {
    __shared__ float qs[kTile][kMaxHn];
    __shared__ float dos[kTile][kMaxHn];
    __shared__ float ls[kTile], ds_[kTile];
    const std::int64_t pair = blockIdx.y, j0 = static_cast<std::int64_t>(blockIdx.x) * kRows;
    const std::int64_t j = j0 + threadIdx.x, hn = P.hn;
    const T* qb = qkv + pair * 3 * hn;
    float k[kMaxHn], v[kMaxHn], dk[kMaxHn], dv[kMaxHn];
    for (std::int64_t c = 0; c < hn; ++c) {
        k[c] = j < P.s ? ldf(qb + j * P.ldq + hn + c) : 0.0f;
        v[c] = j < P.s ? ldf(qb + j * P.ldq + 2 * hn + c) : 0.0f;
        dk[c] = dv[c] = 0.0f;
    }
    for (std::int64_t i0 = j0 / kTile * kTile; i0 < P.s; i0 += kTile) {
        __syncthreads();
        stage(qs, qb, i0, P.s, P.ldq, hn);
        stage(dos, dout + pair * hn, i0, P.s, P.ldo, hn);
        for (int r = threadIdx.x; r < kTile; r += blockDim.x) {
            ls[r] = i0 + r < P.s ? lse[pair * P.s + i0 + r] : 0.0f;
            ds_[r] = i0 + r < P.s ? D[pair * P.s + i0 + r] : 0.0f;
        }
        __syncthreads();
        if (j >= P.s) continue;
        for (int ii = 0; ii < kTile; ++ii) {
            const std::int64_t i = i0 + ii;
            if (i < j || i >= P.s) continue;
            float sdot = 0.0f, dp = 0.0f;
            for (std::int64_t c = 0; c < hn; ++c) {
                sdot += qs[ii][c] * k[c];
                dp += dos[ii][c] * v[c];
            }
            const float p = expf(sdot * P.scale - ls[ii]);
            const float mult = mult_of(P, pair, i, j);
            const float ds = p * (dp * mult - ds_[ii]) * P.scale;
            const float pm = p * mult;
            for (std::int64_t c = 0; c < hn; ++c) {
                dv[c] += pm * dos[ii][c];
                dk[c] += ds * qs[ii][c];
            }
        }
    }
    if (j >= P.s) return;
    T* d = dqkv + j * P.ldq + pair * 3 * hn;
    for (std::int64_t c = 0; c < hn; ++c) {
        stf(d + hn + c, dk[c]);
        stf(d + 2 * hn + c, dv[c]);
    }
}

// dQ: one thread per query row i, key tiles j <= i staged in shared memory.
template <typename T>
__global__ void __launch_bounds__(kRows) flash_dq_kernel(Params P, const T* qkv, const T* dout,
                                                         const float* lse, const float* D, T* dqkv) {
    __shared__ float ks[kTile][kMaxHn];
    __shared__ float vs[kTile][kMaxHn];
    const std::int64_t pair = blockIdx.y, i0 = static_cast<std::int64_t>(blockIdx.x) * kRows;
    const std::int64_t i = i0 + threadIdx.x, hn = P.hn;
    const T* qb = qkv + pair * 3 * hn;
    float q[kMaxHn], dO[kMaxHn], dq[kMaxHn];
    for (std::int64_t c = 0; c < hn; ++c) {
        q[c] = i < P.s ? ldf(qb + i * P.ldq + c) : 0.0f;
        dO[c] = i < P.s ? ldf(dout + i * P.ldo + pair * hn + c) : 0.0f;
        dq[c] = 0.0f;
    }
    const float li = i < P.s ? lse[pair * P.s + i] : 0.0f;
    const float Di = i < P.s ? D[pair * P.s + i] : 0.0f;
    const std::int64_t last = min(P.s, i0 + kRows) - 1;
    for (std::int64_t j0 = 0; j0 <= last; j0 += kTile) {
        __syncthreads();
        stage(ks, qb + hn, j0, P.s, P.ldq, hn);
        stage(vs, qb + 2 * hn, j0, P.s, P.ldq, hn);
        __syncthreads();
        if (i >= P.s || j0 > i) continue;
        const int nj = static_cast<int>(min(static_cast<std::int64_t>(kTile), i - j0 + 1));
        for (int jj = 0; jj < nj; ++jj) {
            float sdot = 0.0f, dp = 0.0f;
            for (std::int64_t c = 0; c < hn; ++c) {
                sdot += q[c] * ks[jj][c];
                dp += dO[c] * vs[jj][c];
            }
            const float p = expf(sdot * P.scale - li);
            const float ds = p * (dp * mult_of(P, pair, i, j0 + jj) - Di) * P.scale;
            for (std::int64_t c = 0; c < hn; ++c) dq[c] += ds * ks[jj][c];
        }
    }
    if (i >= P.s) return;
    T* d = dqkv + i * P.ldq + pair * 3 * hn;
    for (std::int64_t c = 0; c < hn; ++c) stf(d + c, dq[c]);
}

// ---- tensor-core kernels ------------------------------------------------------------
namespace wmma = nvcuda::wmma;

constexpr int kMmaRows = 64;                // rows of a block: queries (fwd), keys (bwd)
constexpr int kMmaCols = 64;                // rows of an inner tile: keys (fwd), queries (bwd)
constexpr int kMmaWarps = kMmaRows / 16;    // a warp owns 16 rows
constexpr int kMmaThreads = 32 * kMmaWarps;
constexpr int kPadHalf = 8;                 // row padding: spreads banks, keeps 16-byte rows
constexpr int kPadFloat = 4;
constexpr int kLS = kMmaCols + kPadFloat;   // fp32 score rows
constexpr int kLP = kMmaCols + kPadHalf;    // 16-bit probability rows

template <typename T>
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
template <typename T>
using FragAt = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::col_major>;
template <typename T>
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major>;
template <typename T>
using FragBt = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

template <typename T>
__device__ __forceinline__ T to_t(float v);
template <>
__device__ __forceinline__ __half to_t<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 to_t<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Rows [r0, r0 + kMmaRows) of a row-major matrix (row stride ld elements, HN columns) into
// a shared tile of row stride HN + kPadHalf, 16 bytes at a time; rows past s are zero.
template <int HN, typename T>
__device__ void load_rows(T* tile, const T* base, std::int64_t r0, std::int64_t s, std::int64_t ld) {
    constexpr int kVec = 16 / sizeof(T), kChunks = HN / kVec, LH = HN + kPadHalf;
    for (int e = threadIdx.x; e < kMmaRows * kChunks; e += blockDim.x) {
        const int r = e / kChunks, c = (e % kChunks) * kVec;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r0 + r < s) v = *reinterpret_cast<const uint4*>(base + (r0 + r) * ld + c);
        *reinterpret_cast<uint4*>(tile + r * LH + c) = v;
    }
}

// acc(16 x 16) += A(16 x K) B(K x 16) over K = 16 * steps; a, b point at the first block.
// A row-major (lda) or column-major (transposed view); B row-major or column-major.
template <typename T, typename FA, typename FB>
__device__ __forceinline__ void mma_steps(FragC& acc, const T* a, int lda, int a_step,
                                          const T* b, int ldb, int b_step, int steps) {
    for (int k = 0; k < steps; ++k) {
        FA fa;
        FB fb;
        wmma::load_matrix_sync(fa, a + k * a_step, lda);
        wmma::load_matrix_sync(fb, b + k * b_step, ldb);
        wmma::mma_sync(acc, fa, fb, acc);
    }
}

static_assert(kMmaRows == kMmaCols, "load_rows stages kMmaRows rows for both");

template <int HN>
constexpr std::size_t mma_fwd_smem() {
    return 3 * kMmaRows * (HN + kPadHalf) * 2 + kMmaRows * kLS * 4 + kMmaRows * kLP * 2 +
           kMmaRows * (HN + kPadFloat) * 4;
}
template <int HN>
constexpr std::size_t mma_bwd_smem() {
    // K, V, Q, dO tiles; P and dS; two fp32 score tiles (S, dP) that later stage dQ/dK/dV;
    // the query rows' lse and D.
    static_assert(2 * kLS >= HN + kPadFloat, "score scratch too small to stage a gradient tile");
    return 4 * kMmaRows * (HN + kPadHalf) * 2 + 2 * kMmaRows * kLP * 2 + 2 * kMmaRows * kLS * 4 +
           2 * kMmaRows * 4;
}

template <int HN, typename T>
__global__ void __launch_bounds__(kMmaThreads) flash_fwd_mma(Params P, const T* qkv, T* out, float* lse) {
    constexpr int LH = HN + kPadHalf, LO = HN + kPadFloat;
    extern __shared__ __align__(128) unsigned char smem[];
    T* qs = reinterpret_cast<T*>(smem);
    T* ks = qs + kMmaRows * LH;
    T* vs = ks + kMmaCols * LH;
    float* sf = reinterpret_cast<float*>(vs + kMmaCols * LH);
    T* ps = reinterpret_cast<T*>(sf + kMmaRows * kLS);
    float* of = reinterpret_cast<float*>(ps + kMmaRows * kLP);

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const std::int64_t pair = blockIdx.y, i0 = static_cast<std::int64_t>(blockIdx.x) * kMmaRows;
    const T* qb = qkv + pair * 3 * HN;
    load_rows<HN>(qs, qb, i0, P.s, P.ldq);
    for (int e = threadIdx.x; e < kMmaRows * LO; e += blockDim.x) of[e] = 0.0f;
    // Lanes 2r and 2r+1 own row warp*16 + r: half of its 64 scores each, the same m and l.
    const int r = lane / 2, half = lane % 2;
    const int row = warp * 16 + r;
    const std::int64_t i = i0 + row;
    float m = -INFINITY, l = 0.0f;
    const std::int64_t last = min(P.s, i0 + kMmaRows) - 1;
    const std::int64_t warp_last = min(P.s - 1, i0 + warp * 16 + 15);
    for (std::int64_t j0 = 0; j0 <= last; j0 += kMmaCols) {
        __syncthreads();  // the previous tile's K and V are no longer read
        load_rows<HN>(ks, qb + HN, j0, P.s, P.ldq);
        load_rows<HN>(vs, qb + 2 * HN, j0, P.s, P.ldq);
        __syncthreads();
        if (j0 > warp_last) continue;  // causal: every key here follows every row of this warp
        for (int nb = 0; nb < kMmaCols / 16; ++nb) {  // S = Q K^T (16 x 64 per warp)
            FragC acc;
            wmma::fill_fragment(acc, 0.0f);
            mma_steps<T, FragA<T>, FragBt<T>>(acc, qs + warp * 16 * LH, LH, 16, ks + nb * 16 * LH, LH, 16, HN / 16);
            wmma::store_matrix_sync(sf + warp * 16 * kLS + nb * 16, acc, kLS, wmma::mem_row_major);
        }
        __syncwarp();
        float* srow = sf + row * kLS + half * 32;
        const std::int64_t jb = j0 + half * 32;
        float tmax = -INFINITY;
        for (int c = 0; c < 32; ++c) {
            const std::int64_t j = jb + c;
            const float v = (i < P.s && j <= i) ? srow[c] * P.scale : -INFINITY;
            srow[c] = v;
            tmax = fmaxf(tmax, v);
        }
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
        const float m_new = fmaxf(m, tmax);
        // A row that sees nothing yet (past the sequence end) keeps zero weights.
        const float alpha = m_new == -INFINITY ? 1.0f : expf(m - m_new);
        float lsum = 0.0f;
        T* prow = ps + row * kLP + half * 32;
        for (int c = 0; c < 32; ++c) {
            const float p = srow[c] == -INFINITY ? 0.0f : expf(srow[c] - m_new);
            lsum += p;
            prow[c] = to_t<T>(p == 0.0f ? 0.0f : p * mult_of(P, pair, i, jb + c));
        }
        lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
        l = l * alpha + lsum;
        m = m_new;
        float* orow = of + row * LO + half * (HN / 2);
        for (int c = 0; c < HN / 2; ++c) orow[c] *= alpha;
        __syncwarp();
        for (int nb = 0; nb < HN / 16; ++nb) {  // O += P V (16 x HN per warp)
            FragC acc;
            float* o = of + warp * 16 * LO + nb * 16;
            wmma::load_matrix_sync(acc, o, LO, wmma::mem_row_major);
            mma_steps<T, FragA<T>, FragB<T>>(acc, ps + warp * 16 * kLP, kLP, 16, vs + nb * 16, LH, 16 * LH,
                                             kMmaCols / 16);
            wmma::store_matrix_sync(o, acc, LO, wmma::mem_row_major);
        }
        __syncwarp();
    }
    if (i >= P.s) return;
    const float inv = 1.0f / l;
    const float* orow = of + row * LO;
    T* o = out + i * P.ldo + pair * HN;
    for (int c = half * (HN / 2); c < (half + 1) * (HN / 2); ++c) o[c] = to_t<T>(orow[c] * inv);
    if (half == 0) lse[pair * P.s + i] = m + logf(l);
}

// One block per 64 keys of a pair: dK and dV of those keys over every query tile at or
// after them; dQ contributions added to dq_acc [s, pairs, HN] fp32 (zeroed by the caller).
template <int HN, typename T>
__global__ void __launch_bounds__(kMmaThreads) flash_bwd_mma(Params P, const T* qkv, const T* dout,
                                                             const float* lse, const float* D,
                                                             T* dqkv, float* dq_acc) {
    constexpr int LH = HN + kPadHalf, LO = HN + kPadFloat;
    extern __shared__ __align__(128) unsigned char smem[];
    T* ks = reinterpret_cast<T*>(smem);
    T* vs = ks + kMmaRows * LH;
    T* qs = vs + kMmaRows * LH;
    T* dos = qs + kMmaCols * LH;
    T* ps = dos + kMmaCols * LH;
    T* dss = ps + kMmaCols * kLP;
    float* sf = reinterpret_cast<float*>(dss + kMmaCols * kLP);
    float* dpf = sf + kMmaCols * kLS;
    float* stage_f = sf;  // [64][LO] after S and dP are used: 2 * kLS >= LO
    float* ls = dpf + kMmaCols * kLS;
    float* dl = ls + kMmaCols;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int r = lane / 2, half = lane % 2;
    const std::int64_t pair = blockIdx.y, j0 = static_cast<std::int64_t>(blockIdx.x) * kMmaRows;
    const T* qb = qkv + pair * 3 * HN;
    load_rows<HN>(ks, qb + HN, j0, P.s, P.ldq);
    load_rows<HN>(vs, qb + 2 * HN, j0, P.s, P.ldq);
    FragC dk[HN / 16], dv[HN / 16];  // in registers across every query tile
#pragma unroll
    for (int nb = 0; nb < HN / 16; ++nb) {
        wmma::fill_fragment(dk[nb], 0.0f);
        wmma::fill_fragment(dv[nb], 0.0f);
    }
    for (std::int64_t i0 = j0; i0 < P.s; i0 += kMmaCols) {
        __syncthreads();  // the previous tile's Q, dO, P, dS and scratch are no longer read
        load_rows<HN>(qs, qb, i0, P.s, P.ldq);
        load_rows<HN>(dos, dout + pair * HN, i0, P.s, P.ldo);
        for (int e = threadIdx.x; e < kMmaCols; e += blockDim.x) {
            ls[e] = i0 + e < P.s ? lse[pair * P.s + i0 + e] : 0.0f;
            dl[e] = i0 + e < P.s ? D[pair * P.s + i0 + e] : 0.0f;
        }
        __syncthreads();
        // Warp w: query rows w*16.. of the tile against the block's 64 keys.
        for (int nb = 0; nb < kMmaRows / 16; ++nb) {
            FragC s_acc, dp_acc;
            wmma::fill_fragment(s_acc, 0.0f);
            wmma::fill_fragment(dp_acc, 0.0f);
            mma_steps<T, FragA<T>, FragBt<T>>(s_acc, qs + warp * 16 * LH, LH, 16, ks + nb * 16 * LH, LH, 16, HN / 16);
            mma_steps<T, FragA<T>, FragBt<T>>(dp_acc, dos + warp * 16 * LH, LH, 16, vs + nb * 16 * LH, LH, 16, HN / 16);
            wmma::store_matrix_sync(sf + warp * 16 * kLS + nb * 16, s_acc, kLS, wmma::mem_row_major);
            wmma::store_matrix_sync(dpf + warp * 16 * kLS + nb * 16, dp_acc, kLS, wmma::mem_row_major);
        }
        __syncwarp();
        {
            const int qrow = warp * 16 + r;
            const std::int64_t i = i0 + qrow;
            const float* srow = sf + qrow * kLS + half * 32;
            const float* dprow = dpf + qrow * kLS + half * 32;
            T* prow = ps + qrow * kLP + half * 32;
            T* dsrow = dss + qrow * kLP + half * 32;
            for (int c = 0; c < 32; ++c) {
                const std::int64_t j = j0 + half * 32 + c;
                float pm = 0.0f, ds = 0.0f;
                if (i < P.s && j <= i) {
                    const float p = expf(srow[c] * P.scale - ls[qrow]);
                    const float mult = mult_of(P, pair, i, j);
                    pm = p * mult;
                    ds = p * (dprow[c] * mult - dl[qrow]) * P.scale;
                }
                prow[c] = to_t<T>(pm);
                dsrow[c] = to_t<T>(ds);
            }
        }
        __syncthreads();  // every query row's P and dS are in place
        // Warp w: keys w*16.. -- dV += P^T dO, dK += dS^T Q.
#pragma unroll
        for (int nb = 0; nb < HN / 16; ++nb) {
            mma_steps<T, FragAt<T>, FragB<T>>(dv[nb], ps + warp * 16, kLP, 16 * kLP, dos + nb * 16, LH, 16 * LH,
                                              kMmaCols / 16);
            mma_steps<T, FragAt<T>, FragB<T>>(dk[nb], dss + warp * 16, kLP, 16 * kLP, qs + nb * 16, LH, 16 * LH,
                                              kMmaCols / 16);
        }
        // Warp w: query rows w*16.. -- dQ = dS K, staged then added to the fp32 scratch.
        for (int nb = 0; nb < HN / 16; ++nb) {
            FragC dq;
            wmma::fill_fragment(dq, 0.0f);
            mma_steps<T, FragA<T>, FragB<T>>(dq, dss + warp * 16 * kLP, kLP, 16, ks + nb * 16, LH, 16 * LH,
                                             kMmaRows / 16);
            // Every warp read its S and dP before the barrier above, so the scratch is free;
            // warps stage into disjoint rows of it.
            wmma::store_matrix_sync(stage_f + warp * 16 * LO + nb * 16, dq, LO, wmma::mem_row_major);
        }
        __syncwarp();
        for (int e = lane; e < 16 * HN; e += 32) {
            const int rr = e / HN, c = e % HN;
            const std::int64_t i = i0 + warp * 16 + rr;
            if (i < P.s) atomicAdd(dq_acc + (i * P.pairs + pair) * HN + c, stage_f[(warp * 16 + rr) * LO + c]);
        }
    }
    // dK and dV of the block's keys, through the scratch (every warp is past its last use).
    __syncthreads();
    auto write_keys = [&](int part) {  // part 1: dK, 2: dV (their places in dqkv)
        __syncwarp();
        for (int e = lane; e < 16 * HN; e += 32) {
            const int rr = e / HN, c = e % HN;
            const std::int64_t j = j0 + warp * 16 + rr;
            if (j < P.s) dqkv[j * P.ldq + pair * 3 * HN + part * HN + c] = to_t<T>(stage_f[(warp * 16 + rr) * LO + c]);
        }
        __syncwarp();
    };
#pragma unroll
    for (int nb = 0; nb < HN / 16; ++nb)
        wmma::store_matrix_sync(stage_f + warp * 16 * LO + nb * 16, dk[nb], LO, wmma::mem_row_major);
    write_keys(1);
#pragma unroll
    for (int nb = 0; nb < HN / 16; ++nb)
        wmma::store_matrix_sync(stage_f + warp * 16 * LO + nb * 16, dv[nb], LO, wmma::mem_row_major);
    write_keys(2);
}

// dQ from the fp32 scratch [s, pairs, HN] into its place in dqkv.
template <typename T>
__global__ void flash_dq_store(Params P, const float* dq_acc, T* dqkv) {
    const std::int64_t n = P.s * P.pairs * P.hn;
    for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < n;
         e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t c = e % P.hn, rp = e / P.hn;  // rp = i * pairs + pair
        dqkv[rp * 3 * P.hn + c] = to_t<T>(dq_acc[e]);
    }
}

Params params(const AttentionArgs& a) {
    Params P;
    P.s = a.s;
    P.pairs = a.b * a.np;
    P.hn = a.hn;
    P.ldq = a.b * a.np * 3 * a.hn;
    P.ldo = a.b * a.np * a.hn;
    P.scale = a.softmax_scale != 0.0f ? a.softmax_scale : 1.0f / std::sqrt(static_cast<float>(a.hn));
    P.drop = a.dropout > 0.0f;
    P.thr = dropout_threshold(a.dropout);
    P.keep_scale = P.drop ? 1.0f / (1.0f - a.dropout) : 1.0f;
    P.seed = a.seed;
    P.offset = a.offset;
    return P;
}

dim3 grid_of(const Params& P) {
    GPT_REQUIRE(P.pairs <= 65535, UsageError, "flash attention on CUDA: b*np = ", P.pairs,
                " exceeds the grid limit of 65535");
    return dim3(static_cast<unsigned>((P.s + kRows - 1) / kRows), static_cast<unsigned>(P.pairs));
}

// Calls f(std::integral_constant<int, HN>{}) for the head dims with tensor-core kernels.
template <typename F>
bool with_mma_head_dim(std::int64_t hn, F&& f) {
    switch (hn) {
        case 64: f(std::integral_constant<int, 64>{}); return true;
        case 80: f(std::integral_constant<int, 80>{}); return true;
        case 96: f(std::integral_constant<int, 96>{}); return true;
        case 128: f(std::integral_constant<int, 128>{}); return true;
        default: return false;
    }
}

// Raises a kernel's dynamic shared memory limit once per process (the sizes exceed the
// 48 KiB default for head dims above 64).
template <typename K>
void allow_smem(K kernel, std::size_t bytes, const char* op) {
    GPT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)), op);
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

FlashKernel& kernel_choice() {
    static FlashKernel k = [] {
        const char* e = std::getenv("GPT_CUDA_FLASH");
        return e && std::strcmp(e, "simple") == 0 ? FlashKernel::Simple : FlashKernel::Auto;
    }();
    return k;
}

}  // namespace

void set_flash_kernel(FlashKernel k) { kernel_choice() = k; }

bool flash_uses_tensor_cores(const AttentionArgs& a, std::initializer_list<const void*> tensors) {
    if (kernel_choice() == FlashKernel::Simple || a.dtype == DType::F32) return false;
    if (!with_mma_head_dim(a.hn, [](auto) {})) return false;
    for (const void* p : tensors)
        if (!aligned16(p)) return false;
    return true;
}

void flash_forward(const AttentionArgs& a, const void* qkv, void* out, float* lse) {
    const Params P = params(a);
    const bool mma = flash_uses_tensor_cores(a, {qkv, out});
    dispatch(a.dtype, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (!std::is_same_v<T, float>) {
            if (mma) {
                with_mma_head_dim(a.hn, [&](auto hn) {
                    constexpr int HN = decltype(hn)::value;
                    constexpr std::size_t bytes = mma_fwd_smem<HN>();
                    static const bool once = (allow_smem(flash_fwd_mma<HN, T>, bytes, "attention_forward (flash)"), true);
                    (void)once;
                    const dim3 grid(static_cast<unsigned>((P.s + kMmaRows - 1) / kMmaRows), grid_of(P).y);
                    flash_fwd_mma<HN, T><<<grid, kMmaThreads, bytes, kStream>>>(
                        P, static_cast<const T*>(qkv), static_cast<T*>(out), lse);
                });
                return;
            }
        }
        flash_fwd_kernel<T><<<grid_of(P), kRows, 0, kStream>>>(P, static_cast<const T*>(qkv),
                                                              static_cast<T*>(out), lse);
    });
    GPT_CUDA_LAUNCH_CHECK("attention_forward (flash)");
}

void flash_backward(const AttentionArgs& a, const void* qkv, const void* out, const float* lse,
                    const void* dout, void* dqkv, float* delta, float* dq_acc) {
    const Params P = params(a);
    const bool mma = flash_uses_tensor_cores(a, {qkv, out, dout, dqkv});
    GPT_REQUIRE(!mma || dq_acc != nullptr, InternalError, "flash backward on tensor cores needs its dQ scratch");
    dispatch(a.dtype, [&](auto tag) {
        using T = decltype(tag);
        flash_delta_kernel<T><<<grid_for(P.pairs * P.s), kThreads, 0, kStream>>>(
            P, static_cast<const T*>(out), static_cast<const T*>(dout), delta);
        if constexpr (!std::is_same_v<T, float>) {
            if (mma) {
                GPT_CUDA_CHECK(cudaMemsetAsync(dq_acc, 0, static_cast<std::size_t>(P.s * P.pairs * P.hn) * sizeof(float),
                                               kStream), "attention_backward (flash)");
                with_mma_head_dim(a.hn, [&](auto hn) {
                    constexpr int HN = decltype(hn)::value;
                    constexpr std::size_t bytes = mma_bwd_smem<HN>();
                    static const bool once = (allow_smem(flash_bwd_mma<HN, T>, bytes, "attention_backward (flash)"), true);
                    (void)once;
                    const dim3 grid(static_cast<unsigned>((P.s + kMmaRows - 1) / kMmaRows), grid_of(P).y);
                    flash_bwd_mma<HN, T><<<grid, kMmaThreads, bytes, kStream>>>(
                        P, static_cast<const T*>(qkv), static_cast<const T*>(dout), lse, delta,
                        static_cast<T*>(dqkv), dq_acc);
                });
                flash_dq_store<T><<<grid_for(P.s * P.pairs * P.hn), kThreads, 0, kStream>>>(
                    P, dq_acc, static_cast<T*>(dqkv));
                return;
            }
        }
        flash_dkdv_kernel<T><<<grid_of(P), kRows, 0, kStream>>>(
            P, static_cast<const T*>(qkv), static_cast<const T*>(dout), lse, delta, static_cast<T*>(dqkv));
        flash_dq_kernel<T><<<grid_of(P), kRows, 0, kStream>>>(
            P, static_cast<const T*>(qkv), static_cast<const T*>(dout), lse, delta, static_cast<T*>(dqkv));
    });
    GPT_CUDA_LAUNCH_CHECK("attention_backward (flash)");
}

}  // namespace gpt::cuda
