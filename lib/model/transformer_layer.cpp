#include "model/transformer_layer.hpp"

#include "core/errors.hpp"
#include "model/linear.hpp"
#include "model/norm.hpp"
#include "model/qk_norm.hpp"
#include "model/sequence_parallel.hpp"

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

namespace {
AttentionArgs pass_attention_args(const PassContext& c, int L) {
    AttentionArgs aa = attention_args(*c.dims, *c.opt, c.micro_batch);
    aa.dropout = c.dropout ? c.opt->attention_dropout : 0.0f;
    // The saved QKV is Megatron's grouped layout: each group's K/V read in place by its heads.
    aa.heads_per_group = c.dims->heads / c.dims->groups();
    aa.seed = c.attention_key;
    aa.offset = dropout_site_offset(L, 0);
    aa.doc_start = c.doc_start;
    return aa;
}

QkvExpandArgs qkv_expand_args(const PassContext& c) {
    const ModelDims& d = *c.dims;
    QkvExpandArgs q;
    q.s = d.seq;
    q.b = c.micro_batch;
    q.groups = d.local_groups();
    q.heads_per_group = d.heads / d.groups();
    q.hn = d.head_dim;
    q.rotary_dim = d.rope ? d.rotary_dim : 0;
    q.rotary_base = d.rotary_base;
    q.rotary_interleaved = d.rotary_interleaved;
    q.dtype = c.opt->dtype;
    q.keep_groups = true;  // rope only: the attention reads the grouped layout
    q.positions = c.positions;
    return q;
}

// A parameter the architecture may lack (-1: none): its pointer or nullptr.
const void* opt_param(const PassContext& c, std::int64_t off) { return off < 0 ? nullptr : c.param(off); }
float* opt_grad(const PassContext& c, std::int64_t off) { return off < 0 ? nullptr : c.grad(off); }
GemmEpilogue bias_epilogue(std::int64_t off) { return off < 0 ? GemmEpilogue::None : GemmEpilogue::Bias; }

QkNormWeights qk_norm_weights(const PassContext& c, const LayerParamOffsets& p) {
    return {opt_param(c, p.q_norm_w), opt_param(c, p.q_norm_b), opt_param(c, p.k_norm_w), opt_param(c, p.k_norm_b)};
}

// A linear layer's forward, in FP8 where the chunk runs layer L's linears in FP8. x nullptr:
// its FP8 codes are ready (norm_then_input).
void linear_fwd(const PassContext& c, int L, Linear which, const void* x, std::int64_t w, void* y,
                std::int64_t in, std::int64_t out, GemmEpilogue epilogue = GemmEpilogue::None,
                const void* bias = nullptr, void* aux = nullptr, bool tanh_gelu = false) {
    GPT_ASSERT(x || (c.fp8 && c.fp8->fuses_input_cast(L)), "linear of layer ", L, " without an input");
    if (c.fp8 && c.fp8->in_fp8(L))
        c.fp8->forward(*c.tp, L, which, x, c.param(w), y, in, out, epilogue, bias, aux, tanh_gelu, c.training,
                       x == nullptr);
    else
        linear_forward(*c.be, x, c.param(w), y, c.tokens, in, out, c.opt->dtype, epilogue, bias, aux, tanh_gelu);
}

// The norm before linear `which` (QKV, FC1) of layer L, then that linear's column-parallel
// input: the norm's output y (saved for backward) gathered under sequence parallelism.
// Where the chunk fuses layer L's input casts (Fp8Linears::fuses_input_cast) the norm also
// writes the linear's FP8 codes, all-gathered as codes under sequence parallelism, and the
// 16-bit input is neither gathered nor cast (the cast was its only reader in forward; the
// backward gathers y again for the weight gradient): returns nullptr, "codes ready".
const void* norm_then_input(const PassContext& c, int L, Linear which, const void* x, std::int64_t w,
                            std::int64_t b, void* y, float* mean, float* rstd, void* gathered) {
    if (!c.fp8 || !c.fp8->fuses_input_cast(L)) {
        norm_forward(c, x, w, b, y, mean, rstd, c.rows);
        return column_parallel_input(c, y, gathered);
    }
    norm_forward_fp8(c, x, w, b, y, mean, rstd, c.rows, c.fp8->input_codes(L, which, c.training, c.sequence_parallel));
    if (c.sequence_parallel) c.fp8->gather_codes(*c.tp, c.rows, c.dims->hidden);
    return nullptr;
}

// The MLP's activation of fc1_pre into act (fc2's input) where it is a pass of its own
// (SwiGLU, squared ReLU, GELU without a bias to fuse into FC1's GEMM epilogue, or an FP8
// layer's GELU under GPT_FP8_GELU=pass). Where the chunk fuses
// layer L's input casts the activation also writes FC2's FP8 codes: returns nullptr, as
// norm_then_input; else act.
const void* activation_into_fc2(const PassContext& c, int L, const void* fc1_pre, void* act) {
    const ModelDims& d = *c.dims;
    const DType t = c.opt->dtype;
    const bool fused = c.fp8 && c.fp8->fuses_input_cast(L);
    const Backend::Fp8Codes codes = fused ? c.fp8->input_codes(L, Linear::Fc2, c.training, false) : Backend::Fp8Codes{};
    const std::int64_t n = c.tokens * d.local_ffn();
    if (d.swiglu) {
        if (fused) c.be->swiglu_forward_fp8(fc1_pre, act, c.tokens, d.local_ffn(), t, codes);
        else c.be->swiglu_forward(fc1_pre, act, c.tokens, d.local_ffn(), t);
    } else if (d.squared_relu) {
        if (fused) c.be->squared_relu_forward_fp8(fc1_pre, act, n, t, codes);
        else c.be->squared_relu_forward(fc1_pre, act, n, t);
    } else {
        if (fused) c.be->gelu_forward_fp8(fc1_pre, act, n, c.opt->tanh_gelu, t, codes);
        else c.be->gelu_forward(fc1_pre, act, n, c.opt->tanh_gelu, t);
    }
    return fused ? nullptr : act;
}

// Its backward: dW += dy^T x (and dbias), then dx = dy W (through GELU's backward with
// gelu_pre). The weight gradient comes first: dx may overwrite x (SwiGLU's output buffer).
// dy_gelu_pre (an FP8 layer's GELU pass, Fp8Linears::backward): dy is d(GELU's output) and
// is clobbered.
void linear_bwd(const PassContext& c, int L, Linear which, const void* dy, const void* x, std::int64_t w,
                float* dbias, void* dx, std::int64_t in, std::int64_t out, const void* gelu_pre = nullptr,
                bool tanh_gelu = false, const void* dy_gelu_pre = nullptr) {
    if (c.fp8 && c.fp8->in_fp8(L)) {
        c.fp8->backward(*c.tp, L, which, dy, x, c.param(w), c.grad(w), dbias, dx, in, out, gelu_pre, tanh_gelu,
                        dy_gelu_pre);
        return;
    }
    GPT_ASSERT(!dy_gelu_pre, "GELU's backward in the cast of a 16-bit layer ", L);
    linear_weight_grad(*c.be, dy, x, c.grad(w), c.tokens, in, out, c.opt->dtype, dbias);
    linear_input_grad(*c.be, dy, c.param(w), dx, c.tokens, in, out, c.opt->dtype, gelu_pre, tanh_gelu);
}

}  // namespace

// The residual stream (x_in, x_mid, x_out, the norms and hidden dropout) has c.rows rows;
// the TP region between column_parallel_input and row_parallel_output has all T.
void transformer_layer_forward(const PassContext& c, const LayerParamOffsets& p,
                               const LayerSaved& s, const void* x_in, int L) {
    Backend& be = *c.be;
    const ModelDims& d = *c.dims;
    const DType t = c.opt->dtype;
    const std::int64_t R = c.rows, h = d.hidden;
    const float p_hidden = c.dropout ? c.opt->hidden_dropout : 0.0f;
    void* gathered = c.act(c.ws->gathered);
    void* tmp1 = c.act(c.ws->tmp1);
    void* tmp2 = c.act(c.ws->tmp2);

    // --- self attention ---
    const void* a = norm_then_input(c, L, Linear::Qkv, x_in, p.ln1_w, p.ln1_b, c.act(s.ln1_out),
                                    c.actf(s.ln1_mean), c.actf(s.ln1_rstd), gathered);
    // The linear's rows are Megatron's grouped [ng, np/ng + 2, hn], which the attention reads
    // as they are (grouped-query attention without a copy of K/V per head). Rotated, the
    // projection goes through the workspace (wide is free during forward).
    void* proj = d.rope ? c.act(c.ws->wide) : c.act(s.qkv);
    linear_fwd(c, L, Linear::Qkv, a, p.qkv_w, proj, h, d.local_qkv_proj(), bias_epilogue(p.qkv_b),
               opt_param(c, p.qkv_b));
    if (d.qk_layernorm) {
        // The norms' input is kept for backward; the norms then rewrite the query and key
        // rows of proj from it, and its value rows stay the projection's.
        be.copy(c.act(s.qkv_pre), proj, static_cast<std::size_t>(c.tokens * d.local_qkv_proj()) * dtype_size(t));
        qk_norm_forward(be, d, qk_norm_weights(c, p), c.act(s.qkv_pre), proj, c.actf(s.qk_mean), c.actf(s.qk_rstd),
                        c.tokens, c.opt->layernorm_eps, t);
    }
    if (d.rope) be.qkv_expand_forward(qkv_expand_args(c), proj, c.act(s.qkv));
    be.attention_forward(pass_attention_args(c, L), c.act(s.qkv), c.act(s.ctx), c.act(s.attn));
    // Row parallel: partial sums, reduced before the bias is added once.
    linear_fwd(c, L, Linear::Dense, c.act(s.ctx), p.dense_w, tmp1, d.local_hidden(), h);
    const void* dense = row_parallel_output(c, tmp1, tmp2);
    be.bias_dropout_add(dense, opt_param(c, p.dense_b), x_in, c.act(s.x_mid), R, h, p_hidden,
                        c.hidden_key, dropout_site_offset(L, 1) + c.shard_offset(), t);

    // --- MLP ---
    const void* a2 = norm_then_input(c, L, Linear::Fc1, c.act(s.x_mid), p.ln2_w, p.ln2_b, c.act(s.ln2_out),
                                     c.actf(s.ln2_mean), c.actf(s.ln2_rstd), gathered);
    const void* fc2_in = c.act(s.gelu_out);
    if (d.swiglu || d.squared_relu) {
        // An activation cuBLASLt has no epilogue for: fc1 adds the bias, then a pass.
        linear_fwd(c, L, Linear::Fc1, a2, p.fc1_w, c.act(s.fc1_pre), h, d.local_fc1(),
                   bias_epilogue(p.fc1_b), opt_param(c, p.fc1_b));
        fc2_in = activation_into_fc2(c, L, c.act(s.fc1_pre), c.act(s.gelu_out));
    } else if (p.fc1_b >= 0 && !(c.fp8 && c.fp8->gelu_pass(L))) {
        linear_fwd(c, L, Linear::Fc1, a2, p.fc1_w, c.act(s.gelu_out), h, d.local_ffn(),
                   GemmEpilogue::BiasGelu, c.param(p.fc1_b), c.act(s.fc1_pre), c.opt->tanh_gelu);
    } else {
        // No bias, or an FP8 layer's GELU pass (GPT_FP8_GELU=pass): the GEMM adds the bias only.
        linear_fwd(c, L, Linear::Fc1, a2, p.fc1_w, c.act(s.fc1_pre), h, d.local_ffn(),
                   bias_epilogue(p.fc1_b), opt_param(c, p.fc1_b));
        fc2_in = activation_into_fc2(c, L, c.act(s.fc1_pre), c.act(s.gelu_out));
    }
    linear_fwd(c, L, Linear::Fc2, fc2_in, p.fc2_w, tmp1, d.local_ffn(), h);
    const void* fc2 = row_parallel_output(c, tmp1, tmp2);
    be.bias_dropout_add(fc2, opt_param(c, p.fc2_b), c.act(s.x_mid), c.act(s.x_out), R, h, p_hidden,
                        c.hidden_key, dropout_site_offset(L, 2) + c.shard_offset(), t);
}

void transformer_layer_backward(const PassContext& c, const LayerParamOffsets& p,
                                const LayerSaved& s, const void* x_in, int L) {
    Backend& be = *c.be;
    const ModelDims& d = *c.dims;
    const DType t = c.opt->dtype;
    const std::int64_t T = c.tokens, R = c.rows, h = d.hidden;
    const float p_hidden = c.dropout ? c.opt->hidden_dropout : 0.0f;
    void* G = c.act(c.ws->grad);  // dL/d(residual stream), (R, h)
    void* tmp1 = c.act(c.ws->tmp1);
    void* tmp2 = c.act(c.ws->tmp2);
    void* wide = c.act(c.ws->wide);
    void* gathered = c.act(c.ws->gathered);
    // d(x + b) of out = residual + dropout(x + b), and b's gradient, its column sum.
    // Without dropout it is G itself (no copy; G is next written by a norm backward),
    // and the row-parallel weight-gradient GEMM, which reads the same rows when there is
    // no sequence parallelism, sums it in its epilogue (gemm_dbias). No bias: no sum.
    struct DropoutGrad {
        const void* dx;
        float* gemm_dbias;
    };
    auto dropout_grad = [&](float* dbias, std::uint64_t site) -> DropoutGrad {
        if (p_hidden == 0.0f) {
            if (R == T || dbias == nullptr) return {G, dbias};
            be.bias_grad(G, dbias, R, h, t);
            return {G, nullptr};
        }
        be.bias_dropout_add_backward(G, tmp1, dbias, R, h, p_hidden, c.hidden_key,
                                     site + c.shard_offset(), t);
        return {tmp1, nullptr};
    };

    // --- MLP: x_out = x_mid + dropout(fc2 + b) ---
    const DropoutGrad mlp = dropout_grad(opt_grad(c, p.fc2_b), dropout_site_offset(L, 2));
    const void* dfc2 = row_parallel_output_grad(c, mlp.dx, gathered);
    const void* dgelu_pre = nullptr;
    if (d.swiglu) {
        // d(swiglu output) into the output's own buffer (read for the last time by the
        // weight gradient), then d[gate, up] into wide.
        linear_bwd(c, L, Linear::Fc2, dfc2, c.act(s.gelu_out), p.fc2_w, mlp.gemm_dbias, c.act(s.gelu_out),
                   d.local_ffn(), h);
        be.swiglu_backward(c.act(s.gelu_out), c.act(s.fc1_pre), wide, T, d.local_ffn(), t);
    } else if (d.squared_relu) {
        // d(activation output) = dfc2 W2 into wide, then through relu(x)^2's backward in place.
        linear_bwd(c, L, Linear::Fc2, dfc2, c.act(s.gelu_out), p.fc2_w, mlp.gemm_dbias, wide, d.local_ffn(), h);
        be.squared_relu_backward(wide, c.act(s.fc1_pre), wide, T * d.local_ffn(), t);
    } else if (c.fp8 && c.fp8->gelu_pass(L)) {
        // An FP8 layer's GELU pass: d(GELU output) = dfc2 W2 by a plain GEMM into wide; FC1's
        // output-gradient cast applies GELU's backward (dgelu_pre below).
        linear_bwd(c, L, Linear::Fc2, dfc2, c.act(s.gelu_out), p.fc2_w, mlp.gemm_dbias, wide, d.local_ffn(), h);
        dgelu_pre = c.act(s.fc1_pre);
    } else {
        // d(fc1 output) = (dfc2 W2) * gelu'(fc1_pre), one GEMM with a GELU-gradient epilogue.
        linear_bwd(c, L, Linear::Fc2, dfc2, c.act(s.gelu_out), p.fc2_w, mlp.gemm_dbias, wide, d.local_ffn(), h,
                   c.act(s.fc1_pre), c.opt->tanh_gelu);
    }
    // Sequence parallel saves only the shard of LN2's output: gather it again (Megatron).
    const void* a2 = column_parallel_input(c, c.act(s.ln2_out), gathered);
    linear_bwd(c, L, Linear::Fc1, wide, a2, p.fc1_w, opt_grad(c, p.fc1_b), tmp1, h, d.local_fc1(), nullptr,
               c.opt->tanh_gelu, dgelu_pre);
    const void* dln2 = column_parallel_input_grad(c, tmp1, tmp2);
    // dL/dx_mid = residual path (G) + LN2 path, in G.
    norm_backward(c, dln2, c.act(s.x_mid), p.ln2_w, p.ln2_b, c.actf(s.ln2_mean),
                  c.actf(s.ln2_rstd), G, G, R);

    // --- attention: x_mid = x_in + dropout(dense + b) ---
    const DropoutGrad attn = dropout_grad(opt_grad(c, p.dense_b), dropout_site_offset(L, 1));
    const void* ddense = row_parallel_output_grad(c, attn.dx, gathered);
    linear_bwd(c, L, Linear::Dense, ddense, c.act(s.ctx), p.dense_w, attn.gemm_dbias, tmp2, d.local_hidden(), h);
    const AttentionArgs aa = pass_attention_args(c, L);
    // Selective recomputation: the attention buffer was overwritten by later layers and
    // micro-batches; the same key and offset redraw the same dropout, so ctx is rewritten
    // with the values it already holds.
    if (c.recompute_attention) be.attention_forward(aa, c.act(s.qkv), c.act(s.ctx), c.act(s.attn));
    be.attention_backward(aa, c.act(s.qkv), c.act(s.ctx), c.act(s.attn), tmp2, wide);
    void* dqkv = wide;  // grouped, each group's dK/dV summed over its heads
    const std::int64_t qkv_width = d.local_qkv_proj();
    if (d.rope) {
        // Rotated back, into the saved QKV's own buffer (dead after the attention backward).
        be.qkv_expand_backward(qkv_expand_args(c), wide, c.act(s.qkv));
        dqkv = c.act(s.qkv);
    }
    if (d.qk_layernorm)
        qk_norm_backward(be, d, qk_norm_weights(c, p),
                         {opt_grad(c, p.q_norm_w), opt_grad(c, p.q_norm_b), opt_grad(c, p.k_norm_w),
                          opt_grad(c, p.k_norm_b)},
                         dqkv, c.act(s.qkv_pre), c.actf(s.qk_mean), c.actf(s.qk_rstd), c.tokens, t);
    const void* a = column_parallel_input(c, c.act(s.ln1_out), gathered);
    linear_bwd(c, L, Linear::Qkv, dqkv, a, p.qkv_w, opt_grad(c, p.qkv_b), tmp1, h, qkv_width);
    const void* dln1 = column_parallel_input_grad(c, tmp1, tmp2);
    // dL/dx_in = residual path (G) + LN1 path, in G.
    norm_backward(c, dln1, x_in, p.ln1_w, p.ln1_b, c.actf(s.ln1_mean), c.actf(s.ln1_rstd), G, G, R);
}

}  // namespace gpt::model
