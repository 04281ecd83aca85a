// Megatron's grouped QKV [ng, np/ng + 2, hn] per token into the attention's [np, 3, hn],
// with rotary position embeddings fused into the same pass (the rotation costs a few flops
// per element of a copy that is memory-bound anyway), and its backward: the inverse
// rotation with the K/V gradients of a group's heads summed. The CUDA half of the
// qkv_expand ops of cpu/decoder_ops.cpp, with the same fp32 angles (rope_inv_freq), at each
// row's position from QkvExpandArgs::positions where given.
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_common.cuh"
#include "backend/decoder_ops_common.hpp"

// nvcc defines __grid_constant__ (sm_70+); the emulator passes every argument by value.
#if !defined(__grid_constant__)
#define __grid_constant__
#endif

namespace gpt::cuda {

namespace {

// Rotary frequencies travel in the kernel's parameters (no device buffer to fill per call),
// read in place by index (__grid_constant__: no per-thread copy of the array); rotary_dim
// up to 2 kMaxPairs = 512, above every head size in use.
constexpr int kMaxPairs = 256;

struct RopeParams {
    int dim = 0;  // rotary_dim; 0: no rotation
    bool interleaved = false;
    float inv_freq[kMaxPairs];
};

struct ExpandShape {
    std::int64_t rows = 0, b = 0, s = 0;
    int groups = 0, qpg = 0, hn = 0;
};

// Rope's position of token row r = (i = r / b, sample r % b): QkvExpandArgs::positions
// ([b, s], Megatron's position_ids: reset per document under --reset-position-ids) where
// given, else i.
__device__ __forceinline__ std::int64_t row_position(const ExpandShape& sh, const std::int32_t* positions,
                                                     std::int64_t r) {
    return positions != nullptr ? positions[r % sh.b * sh.s + r / sh.b] : r / sh.b;
}

// Element d of a rotated vector v (fp32 values read through `at`) at angle position `pos`;
// sign -1 rotates back (the transpose, as the rotation is orthogonal). Pairs are
// (i, i + dim/2), or (2i, 2i + 1) when interleaved; the first of a pair becomes
// a0 c - a1 s, the second a1 c + a0 s.
template <typename At>
__device__ __forceinline__ float rotate(const RopeParams& rp, int d, std::int64_t pos, float sign,
                                        At&& at) {
    const float self = at(d);
    if (d >= rp.dim) return self;
    const int half = rp.dim / 2;
    int pair, partner;
    bool first;
    if (rp.interleaved) {
        pair = d / 2;
        first = (d & 1) == 0;
        partner = first ? d + 1 : d - 1;
    } else {
        first = d < half;
        pair = first ? d : d - half;
        partner = first ? d + half : d - half;
    }
    const float angle = static_cast<float>(pos) * rp.inv_freq[pair];
    const float c = cosf(angle), s = sign * sinf(angle);
    const float other = at(partner);
    return first ? self * c - other * s : self * c + other * s;
}

// A block per token row (grid-stride); threads over the row's np * 3 * hn outputs.
template <typename T>
__global__ void qkv_expand_fwd_kernel(const T* in, T* out, ExpandShape sh, const std::int32_t* positions,
                                      const __grid_constant__ RopeParams rp) {
    const int hn = sh.hn, qpg = sh.qpg;
    const std::int64_t in_row = static_cast<std::int64_t>(sh.groups) * (qpg + 2) * hn;
    const int out_row = sh.groups * qpg * 3 * hn;
    for (std::int64_t r = blockIdx.x; r < sh.rows; r += gridDim.x) {
        const std::int64_t pos = row_position(sh, positions, r);
        for (int e = threadIdx.x; e < out_row; e += blockDim.x) {
            const int head = e / (3 * hn), part = (e / hn) % 3, d = e % hn;
            const int g = head / qpg, i = head % qpg;
            // Query i of the group, or the group's key (qpg) or value (qpg + 1).
            const int src = part == 0 ? i : qpg + part - 1;
            const T* v = in + r * in_row + (static_cast<std::int64_t>(g) * (qpg + 2) + src) * hn;
            auto at = [v](int k) { return ldf(v + k); };
            const float val = part == 2 ? at(d) : rotate(rp, d, pos, 1.0f, at);
            stf(out + r * out_row + e, val);
        }
    }
}

// A block per token row; threads over the grouped row's ng (qpg + 2) hn gradients. A key or
// value gradient is the sum over the group's heads in head order (as the CPU backend).
template <typename T>
__global__ void qkv_expand_bwd_kernel(const T* dqkv, T* dgrouped, ExpandShape sh, const std::int32_t* positions,
                                      const __grid_constant__ RopeParams rp) {
    const int hn = sh.hn, qpg = sh.qpg;
    const int in_row = sh.groups * (qpg + 2) * hn;
    const std::int64_t out_row = static_cast<std::int64_t>(sh.groups) * qpg * 3 * hn;
    for (std::int64_t r = blockIdx.x; r < sh.rows; r += gridDim.x) {
        const std::int64_t pos = row_position(sh, positions, r);
        const T* row = dqkv + r * out_row;
        for (int e = threadIdx.x; e < in_row; e += blockDim.x) {
            const int g = e / ((qpg + 2) * hn), j = (e / hn) % (qpg + 2), d = e % hn;
            const T* grp = row + static_cast<std::int64_t>(g) * qpg * 3 * hn;
            float val;
            if (j < qpg) {
                const T* q = grp + static_cast<std::int64_t>(j) * 3 * hn;
                val = rotate(rp, d, pos, -1.0f, [q](int k) { return ldf(q + k); });
            } else {
                const int part = j - qpg + 1;  // 1: key, 2: value
                auto summed = [grp, part, qpg, hn](int k) {
                    float acc = 0.0f;
                    for (int i = 0; i < qpg; ++i) acc += ldf(grp + (static_cast<std::int64_t>(i) * 3 + part) * hn + k);
                    return acc;
                };
                val = part == 2 ? summed(d) : rotate(rp, d, pos, -1.0f, summed);
            }
            stf(dgrouped + r * in_row + e, val);
        }
    }
}

// keep_groups: the grouped layout in and out, queries and keys rotated by sign (+1 forward,
// -1 backward: the transpose), values copied. A block per token row (grid-stride).
template <typename T>
__global__ void qkv_rope_kernel(const T* in, T* out, ExpandShape sh, const std::int32_t* positions, float sign,
                                const __grid_constant__ RopeParams rp) {
    const int hn = sh.hn, qpg = sh.qpg;
    const int row = sh.groups * (qpg + 2) * hn;
    for (std::int64_t r = blockIdx.x; r < sh.rows; r += gridDim.x) {
        const std::int64_t pos = row_position(sh, positions, r);
        for (int e = threadIdx.x; e < row; e += blockDim.x) {
            const int j = (e / hn) % (qpg + 2), d = e % hn;
            const T* v = in + r * row + (e - d);
            auto at = [v](int k) { return ldf(v + k); };
            stf(out + r * row + e, j == qpg + 1 ? at(d) : rotate(rp, d, pos, sign, at));
        }
    }
}

RopeParams rope_params(const QkvExpandArgs& a) {
    GPT_REQUIRE(a.rotary_dim <= 2 * kMaxPairs, UsageError, "qkv_expand: the CUDA backend rotates at most ",
                2 * kMaxPairs, " dimensions per head (rotary_dim ", a.rotary_dim, ")");
    RopeParams rp;
    rp.dim = static_cast<int>(a.rotary_dim);
    rp.interleaved = a.rotary_interleaved;
    for (int i = 0; i < kMaxPairs; ++i) rp.inv_freq[i] = i < rp.dim / 2 ? rope_inv_freq(a.rotary_base, rp.dim, i) : 0.0f;
    return rp;
}

ExpandShape expand_shape(const QkvExpandArgs& a) {
    // Row offsets are 64-bit; indices within one token's row are int.
    GPT_REQUIRE(a.groups * (a.heads_per_group + 2) * a.hn <= INT32_MAX / 3, UsageError,
                "qkv_expand: a token's QKV row of ", a.groups, " groups x ", a.heads_per_group,
                " heads x ", a.hn, " is too large for the CUDA kernels");
    ExpandShape sh;
    sh.rows = a.s * a.b;
    sh.b = a.b;
    sh.s = a.s;
    sh.groups = static_cast<int>(a.groups);
    sh.qpg = static_cast<int>(a.heads_per_group);
    sh.hn = static_cast<int>(a.hn);
    return sh;
}

unsigned token_grid(std::int64_t rows) {
    return static_cast<unsigned>(std::max<std::int64_t>(1, std::min<std::int64_t>(rows, 65535)));
}

}  // namespace

void CudaBackend::do_qkv_expand_forward(const QkvExpandArgs& a, const void* qkv_grouped, void* qkv) {
    const ExpandShape sh = expand_shape(a);
    const RopeParams rp = rope_params(a);
    dispatch(a.dtype, [&](auto tag) {
        using T = decltype(tag);
        if (a.keep_groups)
            qkv_rope_kernel<T><<<token_grid(sh.rows), kThreads, 0, cuda_stream(stream())>>>(
                static_cast<const T*>(qkv_grouped), static_cast<T*>(qkv), sh, a.positions, 1.0f, rp);
        else
            qkv_expand_fwd_kernel<T><<<token_grid(sh.rows), kThreads, 0, cuda_stream(stream())>>>(
                static_cast<const T*>(qkv_grouped), static_cast<T*>(qkv), sh, a.positions, rp);
    });
    GPT_CUDA_LAUNCH_CHECK("qkv_expand_forward");
}

void CudaBackend::do_qkv_expand_backward(const QkvExpandArgs& a, const void* dqkv, void* dqkv_grouped) {
    const ExpandShape sh = expand_shape(a);
    const RopeParams rp = rope_params(a);
    dispatch(a.dtype, [&](auto tag) {
        using T = decltype(tag);
        if (a.keep_groups)
            qkv_rope_kernel<T><<<token_grid(sh.rows), kThreads, 0, cuda_stream(stream())>>>(
                static_cast<const T*>(dqkv), static_cast<T*>(dqkv_grouped), sh, a.positions, -1.0f, rp);
        else
            qkv_expand_bwd_kernel<T><<<token_grid(sh.rows), kThreads, 0, cuda_stream(stream())>>>(
                static_cast<const T*>(dqkv), static_cast<T*>(dqkv_grouped), sh, a.positions, rp);
    });
    GPT_CUDA_LAUNCH_CHECK("qkv_expand_backward");
}

}  // namespace gpt::cuda
