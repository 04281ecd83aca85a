// The activation memory of one model chunk, planned once: every buffer the forward pass
// saves for backward, per layer and per in-flight micro-batch ("slot"; 1 without pipelining,
// up to the number of warm-up micro-batches with 1F1B), plus the workspace that all layers
// share (gradients in flight, the logits, buffers that recomputation refills). One arena
// holds it all, so peak activation memory is known before the first step and never grows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/model_spec.hpp"
#include "model/recompute_plan.hpp"

namespace gpt::model {

// Byte offsets into the arena. Shapes use T = seq * micro_batch tokens, rows in [s, b]
// order, and R = the residual-stream rows this rank holds: T / tp with sequence
// parallelism (the rank's sequence shard), else T.
//
// With recomputation some offsets point into the shared workspace instead of the slot:
// the attention buffer of every layer (selective), or every buffer of a recomputed layer
// except the x_out of its group's last layer, which is the next group's input (full).
struct LayerSaved {
    std::size_t ln1_mean, ln1_rstd;  // (R) fp32
    std::size_t ln1_out;             // (R, h)       all-gathered to (T, h) where used
    std::size_t qkv;                 // (T, (np + 2 ng) hn / tp)  [s, b, ng, np/ng + 2, hn]
    // --qk-layernorm: the QKV linear's output (the norms' input), as qkv; the two norms'
    // statistics, (T (np + ng) / tp) fp32 each (qk_norm.hpp). Unset without it.
    std::size_t qkv_pre, qk_mean, qk_rstd;
    std::size_t attn;                // backend-specific (lse or probabilities)
    std::size_t ctx;                 // (T, h/tp)   [s, b, np, hn]
    std::size_t x_mid;               // (R, h) residual stream after attention
    std::size_t ln2_mean, ln2_rstd;  // (R) fp32
    std::size_t ln2_out;             // (R, h)
    std::size_t fc1_pre;             // (T, ffn/tp) pre-GELU; (T, 2 ffn/tp) [gate, up] (SwiGLU)
    std::size_t gelu_out;            // (T, ffn/tp)
    std::size_t x_out;               // (R, h) layer output = next layer's input
};

struct SlotSaved {
    std::size_t input;               // (R, h) chunk input: embedding output or received
    std::size_t tokens;              // (b, s) int32   (pre_process)
    std::size_t targets;             // (T) int32      (post_process)
    // --reset-position-ids: each token's position; --reset-attention-mask: each token's first
    // key (AttentionArgs::doc_start). (b, s) int32 each, every chunk of the run; unset else.
    std::size_t positions, doc_start;
    std::vector<LayerSaved> layers;
    std::size_t lnf_mean, lnf_rstd;  // (R) fp32      (post_process)
    std::size_t lnf_out;             // (R, h)        (post_process)
};

struct Workspace {
    std::size_t grad;                // (R, h) gradient of the residual stream
    std::size_t tmp1, tmp2;          // (T, h)
    std::size_t wide;                // (T, max(3h, ffn or 2 ffn with SwiGLU)/tp)
    std::size_t gathered;            // (T, h) all-gathered layernorm output (sequence parallel)
    std::size_t logits;              // (T, V/tp)  overwritten in place by its gradient
    std::size_t row_max, sum_exp, target_logit, loss, dloss;  // (T) fp32
};

// Where a chunk's buffers go when the chunks of one rank share an arena (the interleaved
// schedule): its workspace at workspace_at, and `slots` micro-batch slots of slot_stride
// bytes from slots_at that every chunk lays its own buffers into. The pipeline hands each
// micro-batch of any chunk a free slot, so the arena holds the most micro-batch chunks
// alive at once, not each chunk's own peak summed.
struct ArenaPlacement {
    std::size_t workspace_at = 0;
    std::size_t slots_at = 0;
    std::size_t slot_stride = 0;
    int slots = 0;
};

class ActivationPlan {
public:
    // Own arena: workspace first, then num_slots slots. With `placement`, offsets are in
    // the shared arena it describes and num_slots is ignored.
    ActivationPlan(const ModelDims& dims, const ChunkSpec& chunk, const ModelOptions& opt,
                   int micro_batch, std::size_t attention_saved_bytes, int num_slots = 1,
                   const ArenaPlacement* placement = nullptr);

    std::size_t total_bytes() const { return total_; }  // own arena; 0 when placed
    std::size_t saved_bytes_per_slot() const { return per_slot_; }
    std::size_t workspace_bytes() const { return workspace_bytes_; }
    const SlotSaved& slot(int i) const { return slots_.at(static_cast<std::size_t>(i)); }
    int num_slots() const { return static_cast<int>(slots_.size()); }
    const Workspace& workspace() const { return ws_; }
    std::int64_t tokens() const { return tokens_; }        // T
    std::int64_t hidden_rows() const { return rows_; }     // R
    // The chunk's layers as kept / recomputed groups (see recompute_plan.hpp).
    const std::vector<LayerGroup>& groups() const { return groups_; }
    // Selective recomputation: backward re-runs the core attention to refill `attn`.
    bool attention_recomputed() const { return attention_recomputed_; }

private:
    std::size_t take(std::size_t bytes);

    std::vector<SlotSaved> slots_;
    Workspace ws_{};
    std::vector<LayerGroup> groups_;
    bool attention_recomputed_ = false;
    std::size_t total_ = 0, per_slot_ = 0, workspace_bytes_ = 0;
    std::int64_t tokens_ = 0, rows_ = 0;
};

}  // namespace gpt::model
