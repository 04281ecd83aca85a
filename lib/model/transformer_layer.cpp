#include "model/transformer_layer.hpp"

#include "model/linear.hpp"
#include "model/tp_mappings.hpp"

namespace gpt::model {

AttentionArgs attention_args(const ModelDims& d, const ModelOptions& opt, std::int64_t micro_batch) {
    AttentionArgs a;
    a.s = d.seq;
    a.b = micro_batch;
    a.np = d.local_heads();
    a.hn = d.head_dim;
    a.dtype = opt.dtype;
    a.flash = opt.flash_attention;
    a.softmax_scale = 0.0f;  // 1/sqrt(hn): Megatron without query-key layer scaling
    a.dropout = opt.attention_dropout;
    return a;
}

void transformer_layer_forward(const PassContext& c, const LayerParamOffsets& p,
                               const LayerSaved& s, const void* x_in, int L) {
    Backend& be = *c.be;
    const ModelDims& d = *c.dims;
    const DType t = c.opt->dtype;
    const std::int64_t T = c.tokens, h = d.hidden;
    const float p_hidden = c.dropout ? c.opt->hidden_dropout : 0.0f;

    // --- self attention ---
    be.layernorm_forward(x_in, c.param(p.ln1_w), c.param(p.ln1_b), c.act(s.ln1_out),
                         c.actf(s.ln1_mean), c.actf(s.ln1_rstd), T, h, c.opt->layernorm_eps, t);
    // copy_to_tensor_model_parallel_region: identity forward.
    linear_forward(be, c.act(s.ln1_out), c.param(p.qkv_w), c.act(s.qkv), T, h, d.local_qkv(), t,
                   GemmEpilogue::Bias, c.param(p.qkv_b));
    AttentionArgs aa = attention_args(d, *c.opt, c.micro_batch);
    aa.dropout = c.dropout ? c.opt->attention_dropout : 0.0f;
    aa.seed = c.attention_key;
    aa.offset = dropout_site_offset(L, 0);
    be.attention_forward(aa, c.act(s.qkv), c.act(s.ctx), c.act(s.attn));
    // Row parallel: partial sums, reduced before the bias is added once.
    void* proj = c.act(c.ws->tmp1);
    linear_forward(be, c.act(s.ctx), c.param(p.dense_w), proj, T, d.local_hidden(), h, t);
    reduce_from_tensor_model_parallel_region_forward(*c.tp, proj, T * h, t);
    be.bias_dropout_add(proj, c.param(p.dense_b), x_in, c.act(s.x_mid), T, h, p_hidden,
                        c.hidden_key, dropout_site_offset(L, 1), t);

    // --- MLP ---
    be.layernorm_forward(c.act(s.x_mid), c.param(p.ln2_w), c.param(p.ln2_b), c.act(s.ln2_out),
                         c.actf(s.ln2_mean), c.actf(s.ln2_rstd), T, h, c.opt->layernorm_eps, t);
    linear_forward(be, c.act(s.ln2_out), c.param(p.fc1_w), c.act(s.gelu_out), T, h, d.local_ffn(),
                   t, GemmEpilogue::BiasGelu, c.param(p.fc1_b), c.act(s.fc1_pre), c.opt->tanh_gelu);
    void* fc2 = c.act(c.ws->tmp1);
    linear_forward(be, c.act(s.gelu_out), c.param(p.fc2_w), fc2, T, d.local_ffn(), h, t);
    reduce_from_tensor_model_parallel_region_forward(*c.tp, fc2, T * h, t);
    be.bias_dropout_add(fc2, c.param(p.fc2_b), c.act(s.x_mid), c.act(s.x_out), T, h, p_hidden,
                        c.hidden_key, dropout_site_offset(L, 2), t);
}

void transformer_layer_backward(const PassContext& c, const LayerParamOffsets& p,
                                const LayerSaved& s, const void* x_in, int L) {
    Backend& be = *c.be;
    const ModelDims& d = *c.dims;
    const DType t = c.opt->dtype;
    const std::int64_t T = c.tokens, h = d.hidden;
    const float p_hidden = c.dropout ? c.opt->hidden_dropout : 0.0f;
    void* G = c.act(c.ws->grad);  // dL/d(residual stream), (T, h)
    void* tmp1 = c.act(c.ws->tmp1);
    void* tmp2 = c.act(c.ws->tmp2);
    void* wide = c.act(c.ws->wide);

    // --- MLP: x_out = x_mid + dropout(fc2 + b) ---
    be.bias_dropout_add_backward(G, tmp1, c.grad(p.fc2_b), T, h, p_hidden, c.hidden_key,
                                 dropout_site_offset(L, 2), t);
    // reduce_from_tensor_model_parallel_region: identity backward.
    linear_weight_grad(be, tmp1, c.act(s.gelu_out), c.grad(p.fc2_w), T, d.local_ffn(), h, t);
    linear_input_grad(be, tmp1, c.param(p.fc2_w), wide, T, d.local_ffn(), h, t);
    be.gelu_backward(wide, c.act(s.fc1_pre), wide, T * d.local_ffn(), c.opt->tanh_gelu, t);
    be.bias_grad(wide, c.grad(p.fc1_b), T, d.local_ffn(), t);
    linear_weight_grad(be, wide, c.act(s.ln2_out), c.grad(p.fc1_w), T, h, d.local_ffn(), t);
    linear_input_grad(be, wide, c.param(p.fc1_w), tmp1, T, h, d.local_ffn(), t);
    copy_to_tensor_model_parallel_region_backward(*c.tp, tmp1, T * h, t);
    be.layernorm_backward(tmp1, c.act(s.x_mid), c.param(p.ln2_w), c.actf(s.ln2_mean),
                          c.actf(s.ln2_rstd), tmp2, c.grad(p.ln2_w), c.grad(p.ln2_b), T, h, t);
    be.add(G, tmp2, G, T * h, t);  // dL/dx_mid: residual path + LN2 path

    // --- attention: x_mid = x_in + dropout(dense + b) ---
    be.bias_dropout_add_backward(G, tmp1, c.grad(p.dense_b), T, h, p_hidden, c.hidden_key,
                                 dropout_site_offset(L, 1), t);
    linear_weight_grad(be, tmp1, c.act(s.ctx), c.grad(p.dense_w), T, d.local_hidden(), h, t);
    linear_input_grad(be, tmp1, c.param(p.dense_w), tmp2, T, d.local_hidden(), h, t);
    AttentionArgs aa = attention_args(d, *c.opt, c.micro_batch);
    aa.dropout = c.dropout ? c.opt->attention_dropout : 0.0f;
    aa.seed = c.attention_key;
    aa.offset = dropout_site_offset(L, 0);
    be.attention_backward(aa, c.act(s.qkv), c.act(s.ctx), c.act(s.attn), tmp2, wide);
    be.bias_grad(wide, c.grad(p.qkv_b), T, d.local_qkv(), t);
    linear_weight_grad(be, wide, c.act(s.ln1_out), c.grad(p.qkv_w), T, h, d.local_qkv(), t);
    linear_input_grad(be, wide, c.param(p.qkv_w), tmp1, T, h, d.local_qkv(), t);
    copy_to_tensor_model_parallel_region_backward(*c.tp, tmp1, T * h, t);
    be.layernorm_backward(tmp1, x_in, c.param(p.ln1_w), c.actf(s.ln1_mean), c.actf(s.ln1_rstd),
                          tmp2, c.grad(p.ln1_w), c.grad(p.ln1_b), T, h, t);
    be.add(G, tmp2, G, T * h, t);  // dL/dx_in
}

}  // namespace gpt::model
