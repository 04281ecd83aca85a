// Forward and backward of one pre-LN transformer layer, written by hand against the
// Backend, with every saved activation in an explicit buffer of the ActivationPlan:
//   x_mid = x + dropout(dense(attn(qkv(LN1(x)))) + b_dense)
//   x_out = x_mid + dropout(fc2(gelu(fc1(LN2(x_mid)))) + b_fc2)
#pragma once

#include "model/pass_context.hpp"
#include "model/param_layout.hpp"

namespace gpt::model {

AttentionArgs attention_args(const ModelDims& d, const ModelOptions& opt, std::int64_t micro_batch);

void transformer_layer_forward(const PassContext& c, const LayerParamOffsets& p,
                               const LayerSaved& s, const void* x_in, int global_layer);
// On entry ws.grad holds dL/dx_out; on return dL/dx_in. Parameter grads are accumulated.
void transformer_layer_backward(const PassContext& c, const LayerParamOffsets& p,
                                const LayerSaved& s, const void* x_in, int global_layer);

}  // namespace gpt::model
