// The ends of the network: the embedding (vocab-parallel word embeddings + learned
// positions + hidden dropout) and the head (final LN, LM head tied to the word embeddings,
// vocab-parallel cross-entropy computed in place on the logits).
#pragma once

#include <cstdint>

#include "model/transformer_layer.hpp"

namespace gpt::model {

struct EmbeddingParams {
    std::int64_t word = 0, position = 0;  // position -1: none (rotary embeddings)
};
struct HeadParams {
    // word: the (tied) embedding used as the head, or the untied output_layer; ln_b -1
    // under RMSNorm.
    std::int64_t ln_w = 0, ln_b = 0, word = 0;
};

// out (R, h) = dropout(word[tokens] + position[s]), this rank's residual-stream rows (see
// PassContext); tokens (b, s) int32 in backend memory.
void embedding_forward(const PassContext& c, const EmbeddingParams& p, const std::int32_t* tokens,
                       void* out);
// grad (R, h) = dL/d out (consumed in place); accumulates the embedding grads.
void embedding_backward(const PassContext& c, const EmbeddingParams& p,
                        const std::int32_t* tokens, void* grad);

// Returns the sum over the micro-batch's tokens of the per-token loss. loss_mask: host
// floats, one per token in the targets' [s, b] row order, 1 for a token that counts and 0
// for one left out (--eod-mask-loss); nullptr: every token counts.
double head_forward(const PassContext& c, const HeadParams& p, const SlotSaved& s,
                    const void* x_final, const float* loss_mask);
// dloss_per_token: d objective / d (per-token loss), the same for every counted token (0
// for the ones loss_mask leaves out). Leaves dL/dx_final (R, h) in ws.grad.
void head_backward(const PassContext& c, const HeadParams& p, const SlotSaved& s,
                   const void* x_final, float dloss_per_token, const float* loss_mask);

}  // namespace gpt::model
