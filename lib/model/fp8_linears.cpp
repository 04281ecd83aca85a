#include "model/fp8_linears.hpp"

#include <algorithm>

#include "core/errors.hpp"
#include "model/linear.hpp"

namespace gpt::model {

namespace {

struct Shape {
    std::int64_t out, in;
};

Shape linear_shape(const ModelDims& d, Linear which) {
    switch (which) {
        case Linear::Qkv: return {d.local_qkv_proj(), d.hidden};
        case Linear::Dense: return {d.hidden, d.local_hidden()};
        case Linear::Fc1: return {d.local_fc1(), d.hidden};
        case Linear::Fc2: return {d.hidden, d.local_ffn()};
    }
    GPT_THROW(InternalError, "unknown linear");
}

// Current scaling's scale when fp8_max / amax overflows: the largest value of the tensor's
// own type, as Transformer Engine takes it.
float overflow_scale(DType t) {
    switch (t) {
        case DType::F16: return 65504.0f;
        case DType::BF16: return 0x1.fep127f;
        case DType::F32: return 0x1.fffffep127f;
    }
    return 1.0f;
}

// An FP8 GEMM in Hopper's layout: C[m, n] (type ct, leading dimension n) = A[m, k] B[n, k]^T,
// both operands k-contiguous codes, dequantised by *sa and *sb.
GemmArgs fp8_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const std::uint8_t* a, Fp8Format fa,
                  const float* sa, const std::uint8_t* b, Fp8Format fb, const float* sb, void* c, DType dtype,
                  DType ct) {
    GemmArgs g;
    g.trans_b = true;
    g.m = m;
    g.n = n;
    g.k = k;
    g.a = a;
    g.lda = k;
    g.b = b;
    g.ldb = k;
    g.c = c;
    g.ldc = n;
    g.dtype = dtype;
    g.c_dtype = ct;
    g.fp8 = {true, fa, fb, sa, sb, false};
    return g;
}

// The amaxes' maximum over a group, NaN-sticky. An amax is |x| with the sign bit cleared,
// and such floats order as their bits (every NaN above infinity), so the integers' maximum
// is the floats' and a NaN on one rank wins, as inside one rank's cast; a float Max (MPI's,
// NCCL's, fmax) may drop it. Under the fused input cast with sequence parallelism each rank
// holds only its shard's amax, so this is what keeps a NaN in one shard visible to all.
void max_amax(dist::Communicator& group, float* amax, std::int64_t n) {
    if (group.size() > 1) group.all_reduce(amax, n, dist::CommType::I32, dist::ReduceOp::Max);
}

}  // namespace

Fp8Linears::Fp8Linears(Backend& be, const Fp8Options& opt, const ModelDims& dims, int first_layer,
                       int num_layers, int total_layers, std::int64_t tokens, DType dtype)
    : be_(be), opt_(opt), first_layer_(first_layer), num_layers_(num_layers),
      total_layers_(total_layers), tokens_(tokens), dtype_(dtype) {
    const int linears = num_layers * kLinears;
    for (int i = 0; i < linears; ++i) {
        formats_.push_back(opt.forward);   // input
        formats_.push_back(opt.forward);   // weight
        formats_.push_back(opt.gradient);  // output gradient
    }
    const std::size_t n = formats_.size();
    amax_ = static_cast<float*>(alloc(n * sizeof(float)));
    scale_ = static_cast<float*>(alloc(n * sizeof(float)));
    scale_inv_ = static_cast<float*>(alloc(n * sizeof(float)));
    be_.zero(amax_, n * sizeof(float));
    if (opt.delayed)
        delayed_ = std::make_unique<DelayedScaling>(formats_, opt.amax_history_len, opt.amax_compute_algo, opt.margin);
    upload_scales();  // delayed: 1 until the first update; tensorwise: overwritten per cast
    std::int64_t widest = 0;
    w8_.assign(static_cast<std::size_t>(linears), nullptr);
    wt8_.assign(static_cast<std::size_t>(linears), nullptr);
    weight_cast_.assign(static_cast<std::size_t>(linears), false);
    for (int l = 0; l < num_layers; ++l) {
        if (!in_fp8(first_layer + l)) continue;
        for (int j = 0; j < kLinears; ++j) {
            const Shape s = linear_shape(dims, static_cast<Linear>(j));
            const auto at = static_cast<std::size_t>(l * kLinears + j);
            w8_[at] = static_cast<std::uint8_t*>(alloc(static_cast<std::size_t>(s.out * s.in)));
            wt8_[at] = static_cast<std::uint8_t*>(alloc(static_cast<std::size_t>(s.out * s.in)));
            widest = std::max({widest, s.out, s.in});
        }
    }
    if (widest > 0) {
        const auto act = static_cast<std::size_t>(tokens * widest);
        x8_ = static_cast<std::uint8_t*>(alloc(act));
        xt8_ = static_cast<std::uint8_t*>(alloc(act));
        dy8_ = static_cast<std::uint8_t*>(alloc(act));
        dyt8_ = static_cast<std::uint8_t*>(alloc(act));
    }
}

Fp8Linears::~Fp8Linears() {
    for (void* p : owned_) be_.free(p);
}

void* Fp8Linears::alloc(std::size_t bytes) {
    void* p = be_.alloc(std::max<std::size_t>(bytes, 16));
    owned_.push_back(p);
    bytes_ += bytes;
    return p;
}

bool Fp8Linears::in_fp8(int layer) const {
    return opt_.on && layer >= opt_.bf16_layers_at_start && layer < total_layers_ - opt_.bf16_layers_at_end;
}

int Fp8Linears::operand(int layer, Linear which, int kind) const {
    const int l = layer - first_layer_;
    GPT_ASSERT(l >= 0 && l < num_layers_ && in_fp8(layer), "FP8 linear of layer ", layer,
               " outside the chunk's FP8 layers");
    return (l * kLinears + static_cast<int>(which)) * kOperands + kind;
}

void Fp8Linears::upload_scales() {
    const std::size_t n = formats_.size();
    std::vector<float> s(n, 1.0f), inv(n, 1.0f);
    if (delayed_)
        for (std::size_t i = 0; i < n; ++i) {
            s[i] = delayed_->scale(static_cast<int>(i));
            inv[i] = delayed_->scale_inv(static_cast<int>(i));
        }
    be_.copy_to_device(scale_, s.data(), n * sizeof(float));
    be_.copy_to_device(scale_inv_, inv.data(), n * sizeof(float));
}

void Fp8Linears::prepare_scale(dist::Communicator& tp, int i, const void* x, std::int64_t n) {
    if (opt_.delayed) return;
    be_.zero(amax_ + i, sizeof(float));
    be_.amax(x, dtype_, n, amax_ + i);
    max_amax(tp, amax_ + i, 1);
    be_.fp8_current_scales(amax_ + i, scale_ + i, scale_inv_ + i, 1, formats_[static_cast<std::size_t>(i)],
                           overflow_scale(dtype_));
}

void Fp8Linears::forward(dist::Communicator& tp, int layer, Linear which, const void* x, const void* w,
                         void* y, std::int64_t in, std::int64_t out, GemmEpilogue epilogue,
                         const void* bias, void* aux, bool tanh_gelu, bool record, bool x_cast) {
    const int xi = operand(layer, which, 0), wi = operand(layer, which, 1);
    const auto at = static_cast<std::size_t>((layer - first_layer_) * kLinears + static_cast<int>(which));
    if (!weight_cast_[at]) {
        prepare_scale(tp, wi, w, out * in);
        be_.cast_to_fp8(w, dtype_, out, in, opt_.forward, scale_ + wi, w8_[at], wt8_[at],
                        record && opt_.delayed ? amax_ + wi : nullptr);
        weight_cast_[at] = true;
    }
    if (!x_cast) {
        prepare_scale(tp, xi, x, tokens_ * in);
        be_.cast_to_fp8(x, dtype_, tokens_, in, opt_.forward, scale_ + xi, x8_, nullptr,
                        record && opt_.delayed ? amax_ + xi : nullptr);
    }
    GemmArgs g = fp8_gemm(tokens_, out, in, x8_, opt_.forward, scale_inv_ + xi, w8_[at], opt_.forward,
                          scale_inv_ + wi, y, dtype_, dtype_);
    // Fast accumulation in the forward GEMM only, as Transformer Engine's recipes: the
    // gradients' GEMMs (longer k for wgrad, E5M2 inputs) keep fp32 accumulation.
    g.fp8.fast_accum = true;
    g.epilogue = epilogue;
    g.bias = bias;
    g.aux = aux;
    g.tanh_gelu = tanh_gelu;
    be_.gemm(g);
}

Backend::Fp8Codes Fp8Linears::input_codes(int layer, Linear which, bool record, bool staged) {
    GPT_ASSERT(fuses_input_cast(layer) && which != Linear::Dense, "fused input cast of layer ", layer,
               " linear ", static_cast<int>(which));
    const int xi = operand(layer, which, 0);
    Backend::Fp8Codes codes;
    codes.format = opt_.forward;
    codes.scale = scale_ + xi;
    // x^T's buffer is free outside backward(): the shard's codes wait there for the gather.
    codes.q = staged ? xt8_ : x8_;
    // Each rank's amax of its shard: end_step's reduction over TP gives the whole tensor's.
    codes.amax = record ? amax_ + xi : nullptr;
    return codes;
}

void Fp8Linears::gather_codes(dist::Communicator& tp, std::int64_t shard_rows, std::int64_t in) {
    tp.all_gather(xt8_, x8_, shard_rows * in, dist::CommType::U8);
}

void Fp8Linears::backward(dist::Communicator& tp, int layer, Linear which, const void* dy, const void* x,
                          const void* w, float* dw, float* dbias, void* dx, std::int64_t in,
                          std::int64_t out, const void* gelu_pre, bool tanh_gelu, const void* dy_gelu_pre) {
    const int xi = operand(layer, which, 0), wi = operand(layer, which, 1), gi = operand(layer, which, 2);
    const auto at = static_cast<std::size_t>((layer - first_layer_) * kLinears + static_cast<int>(which));
    GPT_ASSERT(weight_cast_[at], "FP8 backward of layer ", layer, " before its forward");
    // The GELU pass's backward: in the cast where its scale is known and only FP8 GEMMs read
    // the gradient; else into dy first (current scaling needs its amax; a 16-bit weight
    // gradient reads it). dy is the caller's scratch (the layer's `wide`).
    const bool fused_dgelu = dy_gelu_pre && opt_.delayed && opt_.wgrad;
    if (dy_gelu_pre && !fused_dgelu)
        be_.gelu_backward(dy, dy_gelu_pre, const_cast<void*>(dy), tokens_ * out, tanh_gelu, dtype_);
    prepare_scale(tp, gi, dy, tokens_ * out);
    // With an FP8 weight gradient the bias gradient is summed by the cast's pass over dy
    // (Fp8Options::fused_bias_grad) or by a pass of its own; without, by the 16-bit GEMM.
    const bool fused_dbias = dbias && opt_.wgrad && (opt_.fused_bias_grad || fused_dgelu);
    float* const gamax = opt_.delayed ? amax_ + gi : nullptr;
    if (fused_dgelu)
        be_.cast_to_fp8_dgelu(const_cast<void*>(dy), dy_gelu_pre, tanh_gelu, dtype_, tokens_, out, opt_.gradient,
                              scale_ + gi, dy8_, dyt8_, gamax, dbias);
    else if (fused_dbias)
        be_.cast_to_fp8_bias_grad(dy, dtype_, tokens_, out, opt_.gradient, scale_ + gi, dy8_, dyt8_, gamax, dbias);
    else
        be_.cast_to_fp8(dy, dtype_, tokens_, out, opt_.gradient, scale_ + gi, dy8_, opt_.wgrad ? dyt8_ : nullptr,
                        gamax);
    // Weight gradient first: the caller may overwrite x with dx (SwiGLU's output buffer).
    if (opt_.wgrad) {
        // x^T with the forward's scale (current scaling: the same tensor gives the same amax).
        prepare_scale(tp, xi, x, tokens_ * in);
        be_.cast_to_fp8(x, dtype_, tokens_, in, opt_.forward, scale_ + xi, nullptr, xt8_, nullptr);
        if (dbias && !fused_dbias) be_.bias_grad(dy, dbias, tokens_, out, dtype_);
        GemmArgs g = fp8_gemm(out, in, tokens_, dyt8_, opt_.gradient, scale_inv_ + gi, xt8_, opt_.forward,
                              scale_inv_ + xi, dw, dtype_, DType::F32);
        g.beta = 1.0f;  // accumulates into the fp32 main gradient
        be_.gemm(g);
    } else {
        linear_weight_grad(be_, dy, x, dw, tokens_, in, out, dtype_, dbias);
    }
    // B = W^T [in, out]: op(B) = W.
    GemmArgs g = fp8_gemm(tokens_, in, out, dy8_, opt_.gradient, scale_inv_ + gi, wt8_[at], opt_.forward,
                          scale_inv_ + wi, dx, dtype_, dtype_);
    if (gelu_pre) {
        g.epilogue = GemmEpilogue::GeluGrad;
        g.aux = const_cast<void*>(gelu_pre);  // read only by GeluGrad
        g.tanh_gelu = tanh_gelu;
    }
    be_.gemm(g);
}

void Fp8Linears::end_step(dist::Communicator& tp, dist::Communicator& dp) {
    if (!delayed_) return;
    const auto n = static_cast<std::int64_t>(formats_.size());
    max_amax(tp, amax_, n);
    max_amax(dp, amax_, n);
    std::vector<float> host(static_cast<std::size_t>(n));
    be_.copy_to_host(host.data(), amax_, host.size() * sizeof(float));
    for (std::int64_t i = 0; i < n; ++i) delayed_->record(static_cast<int>(i), host[static_cast<std::size_t>(i)]);
    delayed_->update();
    upload_scales();
    be_.zero(amax_, host.size() * sizeof(float));
}

void Fp8Linears::restore(const std::vector<float>& history, const std::vector<float>& scales) {
    GPT_REQUIRE(delayed_, InternalError, "FP8 scaling state restored into a tensorwise run");
    delayed_->restore(history, scales);
    upload_scales();
}

}  // namespace gpt::model
