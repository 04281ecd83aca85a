// Everything a layer (or the embedding / head) needs for one pass besides its own saved
// buffers, and where each dropout site sits in a micro-batch's Philox stream.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/backend.hpp"
#include "dist/communicator.hpp"
#include "model/activation_plan.hpp"
#include "model/fp8_linears.hpp"
#include "model/model_spec.hpp"

namespace gpt::model {

struct PassContext {
    Backend* be = nullptr;
    dist::Communicator* tp = nullptr;
    const ModelDims* dims = nullptr;
    const ModelOptions* opt = nullptr;
    std::int64_t micro_batch = 0;
    std::int64_t tokens = 0;       // T = seq * micro_batch
    // The residual stream's rows on this rank: [first_row, first_row + rows) of the T rows.
    // Sequence parallel: the rank's shard (rows = T / tp); otherwise all of them.
    bool sequence_parallel = false;
    std::int64_t rows = 0;
    std::int64_t first_row = 0;
    std::byte* params = nullptr;   // flat model params (opt->dtype)
    float* grads = nullptr;        // flat fp32 grads
    std::byte* arena = nullptr;    // activation arena of the ActivationPlan
    const Workspace* ws = nullptr;
    // Selective recomputation: the layers' attention buffer is shared, so backward re-runs
    // the core attention to refill it.
    bool recompute_attention = false;
    // Dropout: a disabled pass (evaluation) uses p = 0. Streams are keyed per micro-batch;
    // hidden dropout is the same on every TP rank, attention dropout differs per TP rank
    // (Megatron's model-parallel RNG tracker).
    bool dropout = false;
    bool training = false;  // a training pass (FP8 delayed scaling records amaxes)
    // The chunk's FP8 linear layers (issue 34), or nullptr: every linear in dtype.
    Fp8Linears* fp8 = nullptr;
    std::uint64_t hidden_key = 0;
    std::uint64_t attention_key = 0;
    // The micro-batch's (b, s) positions under --reset-position-ids and first keys under
    // --reset-attention-mask (device memory), or nullptr: positions 0..s-1, plain causal.
    const std::int32_t* positions = nullptr;
    const std::int32_t* doc_start = nullptr;

    void* act(std::size_t off) const { return arena + off; }
    float* actf(std::size_t off) const { return reinterpret_cast<float*>(arena + off); }
    void* param(std::int64_t off) const { return params + off * dtype_size(opt->dtype); }
    float* grad(std::int64_t off) const { return grads + off; }
    // Philox counter of this rank's first residual-stream element: a sequence shard draws
    // the very numbers the whole-sequence pass draws for the same elements.
    std::uint64_t shard_offset() const {
        return static_cast<std::uint64_t>(first_row) * static_cast<std::uint64_t>(dims->hidden);
    }
};

// Counter offsets of each dropout site within a micro-batch's stream: 2^32 elements each.
inline std::uint64_t dropout_site_offset(int global_layer, int site) {
    return static_cast<std::uint64_t>(1 + 3 * global_layer + site) << 32;
}
inline std::uint64_t embedding_dropout_offset() { return 0; }

}  // namespace gpt::model
