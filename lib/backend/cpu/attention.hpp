// Causal self-attention kernels on fp32 data in Megatron's layouts (see backend.hpp):
//   qkv [s, b, ng, np/ng + 2, hn] (grouped: a group's queries, its key, its value),
//   out/dout [s, b, np, hn]; one (batch, head) "pair" at a time, reading its group's K/V.
// The plain kernel saves probabilities [b, np, s, s]; the flash kernel saves only the row
// log-sum-exp [b, np, s]. Both draw attention dropout from philox(seed, offset + index) with
// index = ((bi*np + head)*s + i)*s + j, so they apply the same mask. Document masking
// (AttentionArgs::doc_start) leaves row i the keys [first_key(i), i]; the masked keys'
// probabilities are 0, and the dropout draws of the others keep their indices.
#pragma once

#include <cstdint>

#include "backend/backend.hpp"

namespace gpt::cpu {

struct AttnShape {
    std::int64_t s, b, np, hn;
    std::int64_t qpg;  // query heads per K/V group
    float scale;      // softmax scale (1/sqrt(hn) unless given)
    float dropout;    // probability
    std::uint64_t seed, offset;
    const std::int32_t* doc_start;  // [b, s] or nullptr (AttentionArgs::doc_start)

    explicit AttnShape(const AttentionArgs& a);
    // The first key row i of pair p attends to (document masking), 0 without it.
    std::int64_t first_key(std::int64_t p, std::int64_t i) const {
        return doc_start ? doc_start[p / np * s + i] : 0;
    }
    std::int64_t pairs() const { return b * np; }
    // (batch, group) pairs; pair p = bi*np + head belongs to kv pair p / qpg, and kv pair
    // g's query heads are pairs g*qpg .. g*qpg + qpg - 1.
    std::int64_t kv_pairs() const { return pairs() / qpg; }
    std::int64_t group_width() const { return (qpg + 2) * hn; }
    std::int64_t ld_qkv() const { return kv_pairs() * group_width(); }  // row stride of q, k, v
    std::int64_t ld_out() const { return b * np * hn; }
    // Offsets inside qkv/dqkv (row 0) of pair p's query and of kv pair g's key (its value
    // follows at + hn), and of pair p in out/dout.
    std::int64_t q_at(std::int64_t p) const { return p / qpg * group_width() + p % qpg * hn; }
    std::int64_t k_at(std::int64_t g) const { return g * group_width() + qpg * hn; }
    std::int64_t out_at(std::int64_t p) const { return p * hn; }
    // First Philox index of row i of pair p.
    std::uint64_t mask_index(std::int64_t p, std::int64_t i) const {
        return offset + static_cast<std::uint64_t>((p * s + i) * s);
    }
};

void attention_plain_forward(const AttnShape& sh, const float* qkv, float* out, float* probs);
void attention_plain_backward(const AttnShape& sh, const float* qkv, const float* probs,
                              const float* dout, float* dqkv);
void attention_flash_forward(const AttnShape& sh, const float* qkv, float* out, float* lse);
void attention_flash_backward(const AttnShape& sh, const float* qkv, const float* out,
                              const float* lse, const float* dout, float* dqkv);

}  // namespace gpt::cpu
