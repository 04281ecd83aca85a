// Forward and backward of one pre-LN transformer layer, written by hand against the
// Backend, with every saved activation in an explicit buffer of the ActivationPlan:
//   x_mid = x + dropout(dense(attn(qkv(LN1(x)))) + b_dense)
//   x_out = x_mid + dropout(fc2(gelu(fc1(LN2(x_mid)))) + b_fc2)
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/backend.hpp"
#include "dist/communicator.hpp"
#include "model/activation_plan.hpp"
#include "model/model_spec.hpp"
#include "model/param_layout.hpp"

namespace gpt::model {

// Everything a layer (or the embedding / head) needs besides its own saved buffers.
struct PassContext {
    Backend* be = nullptr;
    dist::Communicator* tp = nullptr;
    const ModelDims* dims = nullptr;
    const ModelOptions* opt = nullptr;
    std::int64_t micro_batch = 0;
    std::int64_t tokens = 0;       // seq * micro_batch
    std::byte* params = nullptr;   // flat model params (opt->dtype)
    float* grads = nullptr;        // flat fp32 grads
    std::byte* arena = nullptr;    // activation arena of the ActivationPlan
    const Workspace* ws = nullptr;
    // Dropout: a disabled pass (evaluation) uses p = 0. Streams are keyed per micro-batch;
    // hidden dropout is the same on every TP rank, attention dropout differs per TP rank
    // (Megatron's model-parallel RNG tracker).
    bool dropout = false;
    std::uint64_t hidden_key = 0;
    std::uint64_t attention_key = 0;

    void* act(std::size_t off) const { return arena + off; }
    float* actf(std::size_t off) const { return reinterpret_cast<float*>(arena + off); }
    void* param(std::int64_t off) const { return params + off * dtype_size(opt->dtype); }
    float* grad(std::int64_t off) const { return grads + off; }
};

// Counter offsets of each dropout site within a micro-batch's stream: 2^32 elements each.
inline std::uint64_t dropout_site_offset(int global_layer, int site) {
    return static_cast<std::uint64_t>(1 + 3 * global_layer + site) << 32;
}
inline std::uint64_t embedding_dropout_offset() { return 0; }

AttentionArgs attention_args(const ModelDims& d, const ModelOptions& opt, std::int64_t micro_batch);

void transformer_layer_forward(const PassContext& c, const LayerParamOffsets& p,
                               const LayerSaved& s, const void* x_in, int global_layer);
// On entry ws.grad holds dL/dx_out; on return dL/dx_in. Parameter grads are accumulated.
void transformer_layer_backward(const PassContext& c, const LayerParamOffsets& p,
                                const LayerSaved& s, const void* x_in, int global_layer);

}  // namespace gpt::model
