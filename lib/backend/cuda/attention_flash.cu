// Flash attention on the GPU (Dao et al. 2022): tiled online softmax, the s x s matrix never
// exists; forward saves the row log-sum-exp [b, np, s] (the CPU flash layout), backward
// recomputes probabilities from it with D_i = rowsum(dO_i * O_i). Dropout masks use the
// CPU's indexing, philox(seed, offset + (pair*s + i)*s + j), so all four kernels (CPU/GPU,
// plain/flash) drop the same elements.
//
// Two implementations behind the same entry points:
//  - tensor-core kernels (attention_flash_sm80.cu: fp16/bf16, head dims 64, 80, 96, 128,
//    16-byte aligned tensors), FlashAttention-2's design on mma.sync;
//  - simple kernels here (every dtype and head dim up to 128): one thread per query (or key)
//    row with fp32 math on CUDA cores. They are the fallback and the tensor-core kernels'
//    reference; GPT_CUDA_FLASH=simple selects them for every call.
// Both honour document masking (AttentionArgs::doc_start: query i sees keys [doc_start_i,
// i]); the sm_90 kernels below do not, so a call with it never selects them.
// GPT_CUDA_FLASH=sm90 (FlashKernel::Sm90) adds a third forward and backward on Hopper's
// wgmma for the cases they cover on an sm_90 device: the forward attention_flash_sm90_ws.cu
// (TMA, warp-specialised; the basic attention_flash_sm90.cu for any case it does not cover
// but that one does), the backward attention_flash_sm90_bwd.cu. GPT_CUDA_FLASH=sm90-fwd
// (Sm90Fwd): that forward alone, the backward sm80's; GPT_CUDA_FLASH=sm90-basic
// (Sm90Basic): the basic forward alone; GPT_CUDA_FLASH=sm90-bwd-1wg (Sm90Bwd1wg) and
// sm90-bwd-plain (Sm90BwdPlain): sm90's kernels with the backward's one-warpgroup
// double-buffered and unpipelined variants (sm90's has two warpgroups), sm90-dq-atomic
// (Sm90DqAtomic) with its dQ by atomics, sm90-bwd-ws (Sm90BwdWs) warp-specialised.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "backend/cuda/attention_flash.hpp"
#include "backend/cuda/attention_flash_params.cuh"
#include "core/environment.hpp"

namespace gpt::cuda {

namespace {

constexpr int kRows = 64;   // rows (threads) per block
constexpr int kTile = 32;   // staged rows per shared-memory tile
constexpr int kMaxHn = kMaxFlashHeadDim;

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
__global__ void __launch_bounds__(kRows) flash_fwd_kernel(FlashParams P, const T* qkv, T* out, float* lse) {
    __shared__ float ks[kTile][kMaxHn];
    __shared__ float vs[kTile][kMaxHn];
    const std::int64_t pair = blockIdx.y, i0 = static_cast<std::int64_t>(blockIdx.x) * kRows;
    const std::int64_t i = i0 + threadIdx.x, hn = P.hn;
    const T* qb = qkv + flash_q_at(P, pair);
    const T* kb = qkv + flash_k_at(P, pair / P.qpg);  // the group's K, then V
    float q[kMaxHn], acc[kMaxHn];
    for (std::int64_t c = 0; c < hn; ++c) {
        q[c] = i < P.s ? ldf(qb + i * P.ldq + c) * P.scale : 0.0f;
        acc[c] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const std::int64_t last = min(P.s, i0 + kRows) - 1;  // causal: no key beyond the last row
    // Document masking: row i sees keys [lo, i]. doc_start never decreases along a sample,
    // so the block's first row has the smallest and no tile before its start is needed.
    const std::int64_t lo = i < P.s ? flash_doc_start(P, pair, i) : 0;
    for (std::int64_t j0 = flash_doc_start(P, pair, i0) / kTile * kTile; j0 <= last; j0 += kTile) {
        __syncthreads();
        stage(ks, kb, j0, P.s, P.ldq, hn);
        stage(vs, kb + hn, j0, P.s, P.ldq, hn);
        __syncthreads();
        // A row skips a tile without a key it sees, so each tile it takes has one (lo <= i):
        // tmax is finite and alpha never exp(-inf - -inf).
        if (i >= P.s || j0 > i || j0 + kTile <= lo) continue;
        const int jb = static_cast<int>(max(lo - j0, std::int64_t{0}));
        const int nj = static_cast<int>(min(static_cast<std::int64_t>(kTile), i - j0 + 1));
        float sc[kTile];
        float tmax = m;
        for (int jj = jb; jj < nj; ++jj) {
            float d = 0.0f;
            for (std::int64_t c = 0; c < hn; ++c) d += q[c] * ks[jj][c];
            sc[jj] = d;
            tmax = fmaxf(tmax, d);
        }
        const float alpha = expf(m - tmax);  // 0 on the first tile (m = -inf)
        l *= alpha;
        for (std::int64_t c = 0; c < hn; ++c) acc[c] *= alpha;
        for (int jj = jb; jj < nj; ++jj) {
            const float p = expf(sc[jj] - tmax);
            l += p;
            const float pm = p * dropout_mult(P, pair, i, j0 + jj);
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

// D[pair*s + i] = dO_i . O_i: a warp per row, rows in memory order ([s, pairs, hn]), so the
// lanes read each row's contiguous elements together.
template <typename T>
__global__ void flash_delta_kernel(FlashParams P, const T* out, const T* dout, float* D) {
    const int lane = threadIdx.x % 32;
    const std::int64_t n = P.pairs * P.s, warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
    for (std::int64_t r = (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x) / 32; r < n;
         r += warps) {  // warp-uniform
        const std::int64_t i = r / P.pairs, pair = r % P.pairs;
        const std::int64_t at = i * P.ldo + pair * P.hn;
        float d = 0.0f;
        for (std::int64_t c = lane; c < P.hn; c += 32) d += ldf(dout + at + c) * ldf(out + at + c);
        d = warp_sum(d);
        if (lane == 0) D[pair * P.s + i] = d;
    }
}

// dK, dV: one thread per key row j of a K/V group (grid y: kv pairs), the group's query
// heads in order and their query tiles i >= j staged in shared memory, so a group's dK/dV
// is summed in registers in a fixed order (no atomics). Query i adds to key j when
// doc_start_i <= j <= i; the walk over a head's query tiles ends at the first tile whose
// first row (the tile's smallest doc_start) starts after the block's last key.
template <typename T>
__global__ void __launch_bounds__(kRows) flash_dkdv_kernel(FlashParams P, const T* qkv, const T* dout,
                                                           const float* lse, const float* D, T* dqkv) {
    __shared__ float qs[kTile][kMaxHn];
    __shared__ float dos[kTile][kMaxHn];
    __shared__ float ls[kTile], ds_[kTile];
    __shared__ std::int64_t lo_[kTile];  // each staged query's first key
    const std::int64_t kv = blockIdx.y, j0 = static_cast<std::int64_t>(blockIdx.x) * kRows;
    const std::int64_t j = j0 + threadIdx.x, hn = P.hn;
    const T* kb = qkv + flash_k_at(P, kv);
    float k[kMaxHn], v[kMaxHn], dk[kMaxHn], dv[kMaxHn];
    for (std::int64_t c = 0; c < hn; ++c) {
        k[c] = j < P.s ? ldf(kb + j * P.ldq + c) : 0.0f;
        v[c] = j < P.s ? ldf(kb + j * P.ldq + hn + c) : 0.0f;
        dk[c] = dv[c] = 0.0f;
    }
    const std::int64_t block_last = min(P.s, j0 + kRows) - 1;
    for (std::int64_t pair = kv * P.qpg; pair < (kv + 1) * P.qpg; ++pair) {
        const T* qb = qkv + flash_q_at(P, pair);
        for (std::int64_t i0 = j0 / kTile * kTile; i0 < P.s; i0 += kTile) {
            if (flash_doc_start(P, pair, i0) > block_last) break;  // block-uniform
            __syncthreads();
            stage(qs, qb, i0, P.s, P.ldq, hn);
            stage(dos, dout + pair * hn, i0, P.s, P.ldo, hn);
            for (int r = threadIdx.x; r < kTile; r += blockDim.x) {
                ls[r] = i0 + r < P.s ? lse[pair * P.s + i0 + r] : 0.0f;
                ds_[r] = i0 + r < P.s ? D[pair * P.s + i0 + r] : 0.0f;
                lo_[r] = i0 + r < P.s ? flash_doc_start(P, pair, i0 + r) : 0;
            }
            __syncthreads();
            if (j >= P.s) continue;
            for (int ii = 0; ii < kTile; ++ii) {
                const std::int64_t i = i0 + ii;
                if (i < j || i >= P.s || lo_[ii] > j) continue;
                float sdot = 0.0f, dp = 0.0f;
                for (std::int64_t c = 0; c < hn; ++c) {
                    sdot += qs[ii][c] * k[c];
                    dp += dos[ii][c] * v[c];
                }
                const float p = expf(sdot * P.scale - ls[ii]);
                const float mult = dropout_mult(P, pair, i, j);
                const float ds = p * (dp * mult - ds_[ii]) * P.scale;
                const float pm = p * mult;
                for (std::int64_t c = 0; c < hn; ++c) {
                    dv[c] += pm * dos[ii][c];
                    dk[c] += ds * qs[ii][c];
                }
            }
        }
    }
    if (j >= P.s) return;
    T* d = dqkv + j * P.ldq + flash_k_at(P, kv);
    for (std::int64_t c = 0; c < hn; ++c) {
        stf(d + c, dk[c]);
        stf(d + hn + c, dv[c]);
    }
}

// dQ: one thread per query row i, key tiles j <= i staged in shared memory.
template <typename T>
__global__ void __launch_bounds__(kRows) flash_dq_kernel(FlashParams P, const T* qkv, const T* dout,
                                                         const float* lse, const float* D, T* dqkv) {
    __shared__ float ks[kTile][kMaxHn];
    __shared__ float vs[kTile][kMaxHn];
    const std::int64_t pair = blockIdx.y, i0 = static_cast<std::int64_t>(blockIdx.x) * kRows;
    const std::int64_t i = i0 + threadIdx.x, hn = P.hn;
    const T* qb = qkv + flash_q_at(P, pair);
    const T* kb = qkv + flash_k_at(P, pair / P.qpg);
    float q[kMaxHn], dO[kMaxHn], dq[kMaxHn];
    for (std::int64_t c = 0; c < hn; ++c) {
        q[c] = i < P.s ? ldf(qb + i * P.ldq + c) : 0.0f;
        dO[c] = i < P.s ? ldf(dout + i * P.ldo + pair * hn + c) : 0.0f;
        dq[c] = 0.0f;
    }
    const float li = i < P.s ? lse[pair * P.s + i] : 0.0f;
    const float Di = i < P.s ? D[pair * P.s + i] : 0.0f;
    const std::int64_t last = min(P.s, i0 + kRows) - 1;
    // Keys [lo, i] as in the forward; no tile before the block's first row's start.
    const std::int64_t lo = i < P.s ? flash_doc_start(P, pair, i) : 0;
    for (std::int64_t j0 = flash_doc_start(P, pair, i0) / kTile * kTile; j0 <= last; j0 += kTile) {
        __syncthreads();
        stage(ks, kb, j0, P.s, P.ldq, hn);
        stage(vs, kb + hn, j0, P.s, P.ldq, hn);
        __syncthreads();
        if (i >= P.s || j0 > i || j0 + kTile <= lo) continue;
        const int jb = static_cast<int>(max(lo - j0, std::int64_t{0}));
        const int nj = static_cast<int>(min(static_cast<std::int64_t>(kTile), i - j0 + 1));
        for (int jj = jb; jj < nj; ++jj) {
            float sdot = 0.0f, dp = 0.0f;
            for (std::int64_t c = 0; c < hn; ++c) {
                sdot += q[c] * ks[jj][c];
                dp += dO[c] * vs[jj][c];
            }
            const float p = expf(sdot * P.scale - li);
            const float ds = p * (dp * dropout_mult(P, pair, i, j0 + jj) - Di) * P.scale;
            for (std::int64_t c = 0; c < hn; ++c) dq[c] += ds * ks[jj][c];
        }
    }
    if (i >= P.s) return;
    T* d = dqkv + i * P.ldq + flash_q_at(P, pair);
    for (std::int64_t c = 0; c < hn; ++c) stf(d + c, dq[c]);
}

// y: the (batch, head) pairs, or the (batch, K/V group) pairs for dK/dV.
dim3 grid_of(const FlashParams& P, bool kv = false) {
    return dim3(static_cast<unsigned>((P.s + kRows - 1) / kRows), static_cast<unsigned>(kv ? P.pairs / P.qpg : P.pairs));
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

FlashKernel& kernel_choice() {
    static FlashKernel k = env::cuda_flash_simple() ? FlashKernel::Simple
                           : env::cuda_flash_sm90() ? FlashKernel::Sm90
                           : env::cuda_flash_sm90_fwd() ? FlashKernel::Sm90Fwd
                           : env::cuda_flash_sm90_basic() ? FlashKernel::Sm90Basic
                           : env::cuda_flash_sm90_bwd_1wg() ? FlashKernel::Sm90Bwd1wg
                           : env::cuda_flash_sm90_bwd_plain() ? FlashKernel::Sm90BwdPlain
                           : env::cuda_flash_sm90_dq_atomic() ? FlashKernel::Sm90DqAtomic
                           : env::cuda_flash_sm90_bwd_ws() ? FlashKernel::Sm90BwdWs
                                                    : FlashKernel::Auto;
    return k;
}
// The choices that run the warp-specialised forward and the sm90 backward (one of its
// variants) where they apply: sm90 and its backward variants.
bool sm90_both_ways(FlashKernel k) {
    return k == FlashKernel::Sm90 || k == FlashKernel::Sm90Bwd1wg || k == FlashKernel::Sm90BwdPlain ||
           k == FlashKernel::Sm90DqAtomic || k == FlashKernel::Sm90BwdWs;
}

bool& assume_sm90() {
    static bool on = false;
    return on;
}

// Whether the current device is sm_90 (wgmma needs sm_90a code: the "a" target has no
// forward compatibility, so exactly 9.0), asked once per device.
bool device_is_sm90() {
    if (assume_sm90()) return true;
    int dev = 0;
    GPT_CUDA_CHECK(cudaGetDevice(&dev), "cudaGetDevice");
    static thread_local int cached_dev = -1;
    static thread_local bool cached = false;
    if (dev != cached_dev) {
        cudaDeviceProp p{};
        GPT_CUDA_CHECK(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
        cached = p.major == 9 && p.minor == 0;
        cached_dev = dev;
    }
    return cached;
}

}  // namespace

FlashParams flash_params(const AttentionArgs& a) {
    // Every flash kernel puts the (batch, head) pairs on the grid's y dimension.
    GPT_REQUIRE(a.b * a.np <= 65535, UsageError, "flash attention on CUDA: b*np = ", a.b * a.np,
                " exceeds the grid limit of 65535");
    FlashParams P;
    P.s = a.s;
    P.pairs = a.b * a.np;
    P.hn = a.hn;
    P.qpg = a.heads_per_group;
    P.np = a.np;
    P.doc_start = a.doc_start;
    P.ldq = a.b * (a.np / a.heads_per_group) * (a.heads_per_group + 2) * a.hn;
    P.ldo = a.b * a.np * a.hn;
    P.scale = a.softmax_scale != 0.0f ? a.softmax_scale : 1.0f / std::sqrt(static_cast<float>(a.hn));
    P.drop = a.dropout > 0.0f;
    P.thr = dropout_threshold(a.dropout);
    P.keep_scale = P.drop ? 1.0f / (1.0f - a.dropout) : 1.0f;
    P.seed = a.seed;
    P.offset = a.offset;
    return P;
}

void set_flash_kernel(FlashKernel k) { kernel_choice() = k; }
void flash_assume_sm90_device_for_tests(bool on) {
    assume_sm90() = on;
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::emulate_sm90(on);  // sm_90's limits (227 KiB of shared memory a block) for its kernels
#endif
}
bool flash_device_is_sm90() { return device_is_sm90(); }

// The sm_90 kernels have no document masking: a call with doc_start runs sm80's (their
// _supports refuse it as well, so a direct launch fails instead of ignoring the mask).
bool flash_forward_uses_sm90_ws(const AttentionArgs& a, std::initializer_list<const void*> tensors) {
    const FlashKernel k = kernel_choice();
    if (a.doc_start != nullptr) return false;
    if ((!sm90_both_ways(k) && k != FlashKernel::Sm90Fwd) || !flash_uses_tensor_cores(a, tensors))
        return false;
    // With dropout too (the same Philox mask as sm80's); the basic forward below has none.
    return flash_sm90_ws_supports(flash_params(a), a.dtype) && device_is_sm90();
}
bool flash_forward_uses_sm90(const AttentionArgs& a, std::initializer_list<const void*> tensors) {
    const FlashKernel k = kernel_choice();
    if (a.doc_start != nullptr) return false;
    if ((!sm90_both_ways(k) && k != FlashKernel::Sm90Fwd && k != FlashKernel::Sm90Basic) ||
        !flash_uses_tensor_cores(a, tensors))
        return false;
    if (flash_forward_uses_sm90_ws(a, tensors)) return true;
    return flash_sm90_supports(flash_params(a), a.dtype) && device_is_sm90();
}
bool flash_backward_uses_sm90(const AttentionArgs& a, std::initializer_list<const void*> tensors) {
    const FlashKernel k = kernel_choice();
    if (a.doc_start != nullptr) return false;
    if (!sm90_both_ways(k) || !flash_uses_tensor_cores(a, tensors))
        return false;
    // With dropout too (the same Philox mask as sm80's).
    return flash_sm90_bwd_supports(flash_params(a), a.dtype) && device_is_sm90();
}
Sm90Bwd flash_backward_sm90_variant() {
    const FlashKernel k = kernel_choice();
    return k == FlashKernel::Sm90           ? Sm90Bwd::TwoWarpgroups
           : k == FlashKernel::Sm90DqAtomic ? Sm90Bwd::TwoWarpgroupsAtomicDq
           : k == FlashKernel::Sm90BwdWs    ? Sm90Bwd::WarpSpecialized
           : k == FlashKernel::Sm90Bwd1wg   ? Sm90Bwd::OneWarpgroup
                                            : Sm90Bwd::Plain;
}
FlashKernel flash_kernel() { return kernel_choice(); }

bool flash_dropout_draws_per_element() { return kernel_switch<env::cuda_dropout_draws_per_element>(); }
void set_flash_dropout_draws_per_element(bool on) { kernel_switch<env::cuda_dropout_draws_per_element>() = on; }

bool flash_uses_tensor_cores(const AttentionArgs& a, std::initializer_list<const void*> tensors) {
    if (kernel_choice() == FlashKernel::Simple || a.dtype == DType::F32) return false;
    if (!flash_sm80_head_dim(a.hn)) return false;
    for (const void* p : tensors)
        if (!aligned16(p)) return false;
    return true;
}

void flash_forward(const AttentionArgs& a, const void* qkv, void* out, float* lse,
                   const Stream& stream) {
    const cudaStream_t st = cuda_stream(stream);
    const FlashParams P = flash_params(a);
    if (flash_forward_uses_sm90_ws(a, {qkv, out})) {
        flash_forward_sm90_ws(P, a.dtype, qkv, out, lse, st);
    } else if (flash_forward_uses_sm90(a, {qkv, out})) {
        flash_forward_sm90(P, a.dtype, qkv, out, lse, st);
    } else if (flash_uses_tensor_cores(a, {qkv, out})) {
        flash_forward_sm80(P, a.dtype, qkv, out, lse, st);
    } else {
        dispatch(a.dtype, [&](auto tag) {
            using T = decltype(tag);
            flash_fwd_kernel<T><<<grid_of(P), kRows, 0, st>>>(P, static_cast<const T*>(qkv),
                                                                  static_cast<T*>(out), lse);
        });
    }
    GPT_CUDA_LAUNCH_CHECK("attention_forward (flash)");
}

void flash_backward(const AttentionArgs& a, const void* qkv, const void* out, const float* lse,
                    const void* dout, void* dqkv, float* delta, float* dq_acc,
                    const Stream& stream) {
    const cudaStream_t st = cuda_stream(stream);
    const FlashParams P = flash_params(a);
    const bool mma = flash_uses_tensor_cores(a, {qkv, out, dout, dqkv});
    GPT_REQUIRE(!mma || dq_acc != nullptr, InternalError, "flash backward on tensor cores needs its dQ scratch");
    const dim3 grid = grid_of(P);
    dispatch(a.dtype, [&](auto tag) {
        using T = decltype(tag);
        flash_delta_kernel<T><<<grid_for(P.pairs * P.s * 32), kThreads, 0, st>>>(
            P, static_cast<const T*>(out), static_cast<const T*>(dout), delta);
        if (mma) return;
        flash_dkdv_kernel<T><<<grid_of(P, true), kRows, 0, st>>>(
            P, static_cast<const T*>(qkv), static_cast<const T*>(dout), lse, delta, static_cast<T*>(dqkv));
        flash_dq_kernel<T><<<grid, kRows, 0, st>>>(
            P, static_cast<const T*>(qkv), static_cast<const T*>(dout), lse, delta, static_cast<T*>(dqkv));
    });
    if (mma && flash_backward_uses_sm90(a, {qkv, out, dout, dqkv}))
        flash_backward_sm90(P, a.dtype, qkv, dout, lse, delta, dqkv, dq_acc, flash_backward_sm90_variant(), st);
    else if (mma)
        flash_backward_sm80(P, a.dtype, qkv, dout, lse, delta, dqkv, dq_acc, st);
    GPT_CUDA_LAUNCH_CHECK("attention_backward (flash)");
}

}  // namespace gpt::cuda
