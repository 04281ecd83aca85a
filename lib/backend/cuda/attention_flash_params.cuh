// What the flash attention kernels of attention_flash.cu (CUDA cores) and
// attention_flash_sm80.cu (tensor cores) share: their parameters, the dropout multiplier
// and the tensor-core entry points.
#pragma once

#include <cstdint>

#include "backend/backend.hpp"
#include "backend/cuda/attention_flash.hpp"
#include "backend/cuda/cuda_common.cuh"
#include "core/philox.hpp"

namespace gpt::cuda {

// qkv is [s, kv_pairs, qpg + 2, hn] (row stride ldq; a kv pair is one (batch, K/V group):
// its qpg queries, its key, its value), out and dout [s, pairs, hn] (row stride ldo), lse
// and D [pairs, s]; a pair is one (batch, head), pair p reads the K/V of kv pair p / qpg.
struct FlashParams {
    std::int64_t s, pairs, hn, ldq, ldo;
    std::int64_t qpg;  // query heads per K/V group (1: no grouped-query attention)
    std::int64_t np;   // heads per sample: pair p is sample p / np
    // AttentionArgs::doc_start ([b, s], device memory) or nullptr (plain causal). Only the
    // sm80 and CUDA-core kernels read it; the sm_90 ones refuse a call with it (_supports).
    const std::int32_t* doc_start;
    float scale;
    bool drop;
    std::uint32_t thr;
    float keep_scale;
    std::uint64_t seed, offset;
};

FlashParams flash_params(const AttentionArgs& a);

// Document masking: the first key query i of pair p attends to (doc_start of its sample; 0
// without masking), so it sees keys [flash_doc_start(P, p, i), i]. i < s.
__device__ __forceinline__ std::int64_t flash_doc_start(const FlashParams& P, std::int64_t pair, std::int64_t i) {
    return P.doc_start != nullptr ? P.doc_start[pair / P.np * P.s + i] : 0;
}

// Offsets in qkv/dqkv (row 0) of pair p's query and of kv pair g's key (its value at + hn).
__host__ __device__ __forceinline__ std::int64_t flash_q_at(const FlashParams& P, std::int64_t p) {
    return p / P.qpg * (P.qpg + 2) * P.hn + p % P.qpg * P.hn;
}
__host__ __device__ __forceinline__ std::int64_t flash_k_at(const FlashParams& P, std::int64_t g) {
    return g * (P.qpg + 2) * P.hn + P.qpg * P.hn;
}

// Philox block `block` of the dropout stream (4 words: indices 4 block .. 4 block + 3), and
// word w of it picked by selects, not by indexing the array with w, which would put the block
// in local memory (a stack frame) in every kernel that draws.
__device__ __forceinline__ Philox4x32 dropout_block(const FlashParams& P, std::uint64_t block) {
    return philox4x32_10(static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), 0u, 0u, P.seed);
}
__device__ __forceinline__ std::uint32_t dropout_word(const Philox4x32& r, unsigned w) {
    return w & 2u ? (w & 1u ? r.v[3] : r.v[2]) : (w & 1u ? r.v[1] : r.v[0]);
}
// Whether score (i, j) of a pair is kept by dropout: the CPU's Philox index (philox_bits,
// dropout_keep), so every kernel drops the same elements.
__device__ __forceinline__ bool dropout_kept_at(const FlashParams& P, std::uint64_t idx) {
    return dropout_word(dropout_block(P, idx >> 2), static_cast<unsigned>(idx & 3u)) >= P.thr;
}
// Whether scores idx and idx + 1 (keys j, j + 1 of one query row) are kept: the same bits as
// two dropout_kept_at calls, from one Philox block where both lie in it (idx % 4 != 3: always
// when idx is even, as in the flash forwards' column pairs 2q, 2q + 1 when the row's base
// index is even, e.g. an even s and offset). Each block is a whole Philox4x32-10, so this
// halves the draws of a forward with dropout; a lane whose pair straddles two blocks draws
// the second one (the warp with it).
__device__ __forceinline__ void dropout_kept_pair_at(const FlashParams& P, std::uint64_t idx, bool& k0, bool& k1) {
    const std::uint64_t block = idx >> 2;
    const unsigned w = static_cast<unsigned>(idx & 3u);
    const Philox4x32 r = dropout_block(P, block);
    k0 = dropout_word(r, w) >= P.thr;
    k1 = (w != 3u ? dropout_word(r, w + 1) : dropout_block(P, block + 1).v[0]) >= P.thr;
}
// idx = the Philox index of score (i, j) of the pair.
__device__ __forceinline__ std::uint64_t dropout_index(const FlashParams& P, std::int64_t pair, std::int64_t i,
                                                       std::int64_t j) {
    return P.offset + static_cast<std::uint64_t>((pair * P.s + i) * P.s + j);
}
__device__ __forceinline__ bool dropout_kept(const FlashParams& P, std::int64_t pair, std::int64_t i,
                                             std::int64_t j) {
    return dropout_kept_at(P, dropout_index(P, pair, i, j));
}
// The keep bits of keys key0 .. key0 + N - 1 of query i of a pair (N = 16 or 32), bit k for
// key key0 + k, drawn from whole Philox blocks: the N consecutive indices span N / 4 blocks,
// one more where the first index is not a multiple of 4. The flash backwards draw a step's
// mask this way, a word a thread, where one draw per fragment element (the thread's keys g and
// g + 8 lie in different blocks) took 4 blocks for every one used. A rolled loop: unrolled,
// ptxas interleaves the draws' rounds for ILP and spills.
template <int N>
__device__ __forceinline__ std::uint32_t dropout_keep_bits(const FlashParams& P, std::int64_t pair, std::int64_t i,
                                                           std::int64_t key0) {
    static_assert(N == 16 || N == 32, "a half word or a word");
    const std::uint64_t x = dropout_index(P, pair, i, key0);
    const int skew = static_cast<int>(x & 3u);  // the first index within its block
    const int blocks = skew == 0 ? N / 4 : N / 4 + 1;
    std::uint32_t bits = 0;
#pragma unroll 1
    for (int b = 0; b < blocks; ++b) {
        const Philox4x32 r = dropout_block(P, (x >> 2) + static_cast<std::uint64_t>(b));
#pragma unroll
        for (int w = 0; w < 4; ++w) {
            const int k = 4 * b + w - skew;  // the key within the word
            if (k >= 0 && k < N && dropout_word(r, static_cast<unsigned>(w)) >= P.thr) bits |= 1u << k;
        }
    }
    return bits;
}
// The dropout multiplier of score (i, j): 0 if dropped, else 1 / (1 - p).
__device__ __forceinline__ float dropout_mult(const FlashParams& P, std::int64_t pair, std::int64_t i,
                                              std::int64_t j) {
    if (!P.drop) return 1.0f;
    return dropout_kept(P, pair, i, j) ? P.keep_scale : 0.0f;
}

// The dropout multipliers of scores (i, j) and (i, j + 1): 0 if dropped, else 1 / (1 - p).
__device__ __forceinline__ void dropout_mult_pair(const FlashParams& P, std::int64_t pair, std::int64_t i,
                                                  std::int64_t j, float& m0, float& m1) {
    bool k0 = true, k1 = true;
    if (P.drop) dropout_kept_pair_at(P, dropout_index(P, pair, i, j), k0, k1);
    m0 = k0 ? P.keep_scale : 0.0f;
    m1 = k1 ? P.keep_scale : 0.0f;
}

// Tensor-core kernels (sm_80+ mma.sync): head dims with a kernel, and the launches. D is
// rowsum(dO * O) per query row; dq_acc an fp32 scratch of s*pairs*hn elements.
bool flash_sm80_head_dim(std::int64_t hn);
void flash_forward_sm80(const FlashParams& P, DType t, const void* qkv, void* out, float* lse,
                        cudaStream_t stream);
void flash_backward_sm80(const FlashParams& P, DType t, const void* qkv, const void* dout, const float* lse,
                         const float* D, void* dqkv, float* dq_acc, cudaStream_t stream);
// dQ from the fp32 scratch dq_acc [s, pairs, hn] (summed there by a backward's key blocks)
// into its place in dqkv, rounded to t (the sm80 backward's last step, shared with sm90's).
void flash_dq_finish(const FlashParams& P, DType t, const float* dq_acc, void* dqkv, cudaStream_t stream);

// The sm_90a forward on wgmma (attention_flash_sm90.cu): head dims 64 and 128, fp16/bf16,
// no dropout; its O and lse are the sm80 forward's, so the sm80 backward follows it. The
// kernel traps on any device but sm_90 (the caller checks).
bool flash_sm90_supports(const FlashParams& P, DType t);
void flash_forward_sm90(const FlashParams& P, DType t, const void* qkv, void* out, float* lse,
                        cudaStream_t stream);
// The sm_90a backward on wgmma (attention_flash_sm90_bwd.cu): the sm80 backward's contract
// (D = rowsum(dO * O), dq_acc its fp32 dQ scratch, which it clears), head dims 64, 96 and
// 128, fp16/bf16, dropout (dropout_kept's mask), grouped K/V included. Traps on any device but sm_90 (the caller checks).
// `variant`: attention_flash.hpp's Sm90Bwd.
bool flash_sm90_bwd_supports(const FlashParams& P, DType t);
void flash_backward_sm90(const FlashParams& P, DType t, const void* qkv, const void* dout, const float* lse,
                         const float* D, void* dqkv, float* dq_acc, Sm90Bwd variant, cudaStream_t stream);
// The warp-specialised sm_90a forward (attention_flash_sm90_ws.cu: TMA producer, two
// consumer warpgroups, two-stage K/V ring): head dims 64, 96, 128, fp16/bf16, dropout with
// the mask of dropout_kept; the same O and lse contract.
bool flash_sm90_ws_supports(const FlashParams& P, DType t);
void flash_forward_sm90_ws(const FlashParams& P, DType t, const void* qkv, void* out, float* lse,
                           cudaStream_t stream);

// Two adjacent dQ columns into the fp32 scratch of a flash backward: one vector atomic where
// sm_90 has it (CUDA's atomicAdd(float2*, float2): each component atomic, their order
// unspecified; 8-byte aligned, which an even column of a cudaMalloc'd row is), half the
// atomic instructions of two scalar ones; two scalar atomics on sm_80 (A100), which has no
// float2 atomicAdd.
__device__ __forceinline__ void atomic_add2(float* p, float a, float b) {
#if defined(GPT_CUDA_EMU) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
    atomicAdd(reinterpret_cast<float2*>(p), make_float2(a, b));
#else
    atomicAdd(p, a);
    atomicAdd(p + 1, b);
#endif
}

}  // namespace gpt::cuda
