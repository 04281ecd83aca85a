// The Backend's public ops: every argument check and every composite op, written once above
// the device implementations (the protected do_* of CpuBackend, CudaBackend, ...), so a call
// rejected on one device is rejected on all and composites give the same result everywhere.
//
// Misuse throws InternalError, not UsageError: the model, optimizer and tests compute every
// argument passed here, so a bad one is a bug in our code (exit 2 is for the user's mistakes,
// which options/validate catch before a backend is ever called). Device limits that a valid
// configuration can reach (CUDA's grid limits, flash head dims) stay with the device and keep
// naming what the user can change.
#include <cmath>

#include "backend/backend.hpp"
#include "backend/gemm_args.hpp"
#include "core/errors.hpp"

namespace gpt {

namespace {

void check_size(std::int64_t n, const char* op) {
    GPT_REQUIRE(n >= 0, InternalError, op, ": negative size ", n);
}
// rows x cols with empty rows allowed (elementwise over rows)
void check_matrix(std::int64_t rows, std::int64_t cols, const char* op) {
    GPT_REQUIRE(rows >= 0 && cols >= 0, InternalError, op, ": bad shape ", rows, "x", cols);
}
// rows of cols > 0 elements reduced per row (norms, softmax, GLU)
void check_rows(std::int64_t rows, std::int64_t cols, const char* op) {
    GPT_REQUIRE(rows >= 0 && cols > 0, InternalError, op, ": bad shape ", rows, "x", cols);
}
void check_norm_rows(const NormRows& at, const char* op) {
    GPT_REQUIRE(at.block > 0 && at.first >= 0 && at.first + at.block <= at.stride, InternalError, op,
                ": rows block ", at.block, " at ", at.first, " do not fit a stride of ", at.stride);
}
void check_p(float p, const char* op) {
    GPT_REQUIRE(p >= 0.0f && p < 1.0f, InternalError, op, ": dropout probability ", p,
                " must be in [0, 1)");
}
void check_attention(const AttentionArgs& a) {
    GPT_REQUIRE(a.s > 0 && a.b > 0 && a.np > 0 && a.hn > 0, InternalError,
                "attention: bad shape s=", a.s, " b=", a.b, " np=", a.np, " hn=", a.hn);
    GPT_REQUIRE(a.heads_per_group > 0 && a.np % a.heads_per_group == 0, InternalError,
                "attention: ", a.np, " query heads do not split into groups of ", a.heads_per_group);
    check_p(a.dropout, "attention");
}
void check_qkv_expand(const QkvExpandArgs& a, const char* op) {
    GPT_REQUIRE(a.s > 0 && a.b > 0 && a.groups > 0 && a.heads_per_group > 0 && a.hn > 0 &&
                    a.rotary_dim >= 0 && a.rotary_dim <= a.hn && a.rotary_dim % 2 == 0,
                InternalError, op, ": bad shape s=", a.s, " b=", a.b, " groups=", a.groups,
                " heads/group=", a.heads_per_group, " hn=", a.hn, " rotary_dim=", a.rotary_dim);
}
void check_embedding(std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t vocab_start,
                     std::int64_t vocab_end, const char* op) {
    GPT_REQUIRE(b >= 0 && s >= 0 && h > 0 && vocab_end >= vocab_start, InternalError, op,
                ": bad shape b=", b, " s=", s, " h=", h, " vocab [", vocab_start, ", ",
                vocab_end, ")");
}
void check_positions(std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t first,
                     const char* op) {
    GPT_REQUIRE(b >= 0 && s >= 0 && h > 0 && first >= 0, InternalError, op, ": bad shape b=",
                b, " s=", s, " h=", h, " first position ", first);
}

}  // namespace

void Backend::gemm(const GemmArgs& g) {
    validate_gemm_args(g);
    do_gemm(g);
}

void Backend::layernorm_forward(const void* x, const void* gamma, const void* beta, void* y,
                                float* mean, float* rstd, std::int64_t rows, std::int64_t cols,
                                float eps, DType dtype, bool zero_centered_gamma, const NormRows& at) {
    check_rows(rows, cols, "layernorm_forward");
    check_norm_rows(at, "layernorm_forward");
    do_layernorm_forward(x, gamma, beta, y, mean, rstd, rows, cols, eps, dtype, zero_centered_gamma, at);
}
void Backend::layernorm_backward(const void* dy, const void* x, const void* gamma,
                                 const float* mean, const float* rstd, const void* dresidual,
                                 void* dx, float* dgamma, float* dbeta, std::int64_t rows,
                                 std::int64_t cols, DType dtype, bool zero_centered_gamma, const NormRows& at) {
    check_rows(rows, cols, "layernorm_backward");
    check_norm_rows(at, "layernorm_backward");
    do_layernorm_backward(dy, x, gamma, mean, rstd, dresidual, dx, dgamma, dbeta, rows, cols,
                          dtype, zero_centered_gamma, at);
}

void Backend::gelu_forward(const void* x, void* y, std::int64_t n, bool tanh_approx,
                           DType dtype) {
    check_size(n, "gelu_forward");
    do_gelu_forward(x, y, n, tanh_approx, dtype);
}
void Backend::gelu_backward(const void* dy, const void* x, void* dx, std::int64_t n,
                            bool tanh_approx, DType dtype) {
    check_size(n, "gelu_backward");
    do_gelu_backward(dy, x, dx, n, tanh_approx, dtype);
}

void Backend::bias_add(void* x, const void* bias, std::int64_t rows, std::int64_t cols,
                       DType dtype) {
    check_matrix(rows, cols, "bias_add");
    do_bias_add(x, bias, rows, cols, dtype);
}
void Backend::bias_grad(const void* dy, float* dbias, std::int64_t rows, std::int64_t cols,
                        DType dtype) {
    check_matrix(rows, cols, "bias_grad");
    do_bias_grad(dy, dbias, rows, cols, dtype);
}

void Backend::bias_dropout_add(const void* x, const void* bias, const void* residual, void* out,
                               std::int64_t rows, std::int64_t cols, float p, std::uint64_t seed,
                               std::uint64_t offset, DType dtype) {
    check_p(p, "bias_dropout_add");
    check_matrix(rows, cols, "bias_dropout_add");
    do_bias_dropout_add(x, bias, residual, out, rows, cols, p, seed, offset, dtype);
}

void Backend::bias_dropout_add_backward(const void* dout, void* dx, float* dbias,
                                        std::int64_t rows, std::int64_t cols, float p,
                                        std::uint64_t seed, std::uint64_t offset, DType dtype) {
    check_p(p, "bias_dropout_add_backward");
    check_matrix(rows, cols, "bias_dropout_add_backward");
    // Not fused: the mask pass is memory-bound either way, and the bias gradient must be the
    // column sum of dx as stored (rounded to dtype), what autograd sees, on every device.
    dropout_forward(dout, dx, rows * cols, p, seed, offset, dtype);
    if (dbias) bias_grad(dx, dbias, rows, cols, dtype);
}

void Backend::dropout_forward(const void* x, void* y, std::int64_t n, float p,
                              std::uint64_t seed, std::uint64_t offset, DType dtype) {
    check_p(p, "dropout_forward");
    check_size(n, "dropout_forward");
    if (p == 0.0f) {  // the identity: no mask to draw
        copy(y, x, static_cast<std::size_t>(n) * dtype_size(dtype));
        return;
    }
    do_dropout_forward(x, y, n, p, seed, offset, dtype);
}

void Backend::add(const void* a, const void* b, void* y, std::int64_t n, DType dtype) {
    check_size(n, "add");
    do_add(a, b, y, n, dtype);
}
void Backend::accumulate_f32(const void* x, float* y, std::int64_t n, DType dtype) {
    check_size(n, "accumulate_f32");
    do_accumulate_f32(x, y, n, dtype);
}
void Backend::scale(void* x, float alpha, std::int64_t n, DType dtype) {
    check_size(n, "scale");
    do_scale(x, alpha, n, dtype);
}
void Backend::cast(const void* src, DType src_type, void* dst, DType dst_type, std::int64_t n) {
    check_size(n, "cast");
    if (src_type == dst_type) {
        copy(dst, src, static_cast<std::size_t>(n) * dtype_size(src_type));
        return;
    }
    do_cast(src, src_type, dst, dst_type, n);
}

void Backend::cast_to_fp8(const void* x, DType dtype, std::int64_t rows, std::int64_t cols,
                          Fp8Format format, const float* scale, std::uint8_t* q, std::uint8_t* q_t,
                          float* amax) {
    check_matrix(rows, cols, "cast_to_fp8");
    GPT_REQUIRE(x && scale && (q || q_t), InternalError,
                "cast_to_fp8: needs x, a scale and at least one output");
    if (rows == 0 || cols == 0) return;
    do_cast_to_fp8(x, dtype, rows, cols, format, scale, q, q_t, amax);
}

void Backend::cast_to_fp8_bias_grad(const void* dy, DType dtype, std::int64_t rows, std::int64_t cols,
                                    Fp8Format format, const float* scale, std::uint8_t* q, std::uint8_t* q_t,
                                    float* amax, float* dbias) {
    check_matrix(rows, cols, "cast_to_fp8_bias_grad");
    GPT_REQUIRE(dy && scale && (q || q_t) && dbias, InternalError,
                "cast_to_fp8_bias_grad: needs dy, a scale, at least one codes' output and dbias");
    if (rows == 0 || cols == 0) return;
    do_cast_to_fp8_bias_grad(dy, dtype, rows, cols, format, scale, q, q_t, amax, dbias);
}

void Backend::do_cast_to_fp8_bias_grad(const void* dy, DType dtype, std::int64_t rows, std::int64_t cols,
                                       Fp8Format format, const float* scale, std::uint8_t* q,
                                       std::uint8_t* q_t, float* amax, float* dbias) {
    do_cast_to_fp8(dy, dtype, rows, cols, format, scale, q, q_t, amax);
    do_bias_grad(dy, dbias, rows, cols, dtype);
}

void Backend::cast_to_fp8_dgelu(void* dy, const void* pre, bool tanh_approx, DType dtype, std::int64_t rows,
                                std::int64_t cols, Fp8Format format, const float* scale, std::uint8_t* q,
                                std::uint8_t* q_t, float* amax, float* dbias) {
    check_matrix(rows, cols, "cast_to_fp8_dgelu");
    GPT_REQUIRE(dy && pre && scale && (q || q_t), InternalError,
                "cast_to_fp8_dgelu: needs dy, the pre-activation, a scale and at least one codes' output");
    if (rows == 0 || cols == 0) return;
    do_cast_to_fp8_dgelu(dy, pre, tanh_approx, dtype, rows, cols, format, scale, q, q_t, amax, dbias);
}

void Backend::do_cast_to_fp8_dgelu(void* dy, const void* pre, bool tanh_approx, DType dtype, std::int64_t rows,
                                   std::int64_t cols, Fp8Format format, const float* scale, std::uint8_t* q,
                                   std::uint8_t* q_t, float* amax, float* dbias) {
    do_gelu_backward(dy, pre, dy, rows * cols, tanh_approx, dtype);
    if (dbias)
        do_cast_to_fp8_bias_grad(dy, dtype, rows, cols, format, scale, q, q_t, amax, dbias);
    else
        do_cast_to_fp8(dy, dtype, rows, cols, format, scale, q, q_t, amax);
}

void Backend::amax(const void* x, DType dtype, std::int64_t n, float* amax) {
    check_size(n, "amax");
    GPT_REQUIRE(amax, InternalError, "amax: null output");
    if (n > 0) do_amax(x, dtype, n, amax);
}

void Backend::fp8_current_scales(const float* amax, float* scale, float* scale_inv,
                                 std::int64_t n, Fp8Format format, float if_overflow) {
    check_size(n, "fp8_current_scales");
    GPT_REQUIRE(if_overflow > 0.0f && std::isfinite(if_overflow), InternalError,
                "fp8_current_scales: the overflow scale ", if_overflow, " must be finite and positive");
    if (n > 0) do_fp8_current_scales(amax, scale, scale_inv, n, format, if_overflow);
}

void Backend::norm_forward_fp8(bool rmsnorm, const void* x, const void* gamma, const void* beta, void* y,
                               float* mean, float* rstd, std::int64_t rows, std::int64_t cols, float eps,
                               DType dtype, const Fp8Codes& codes, bool zero_centered_gamma) {
    check_rows(rows, cols, "norm_forward_fp8");
    GPT_REQUIRE(codes.scale && codes.q && (rmsnorm || (beta && mean)), InternalError,
                "norm_forward_fp8: needs a scale, the codes' buffer and (layernorm) beta and mean");
    do_norm_forward_fp8(rmsnorm, x, gamma, beta, y, mean, rstd, rows, cols, eps, dtype, codes, zero_centered_gamma);
}

void Backend::do_norm_forward_fp8(bool rmsnorm, const void* x, const void* gamma, const void* beta, void* y,
                                  float* mean, float* rstd, std::int64_t rows, std::int64_t cols, float eps,
                                  DType dtype, const Fp8Codes& codes, bool zero_centered_gamma) {
    if (rmsnorm) do_rmsnorm_forward(x, gamma, y, rstd, rows, cols, eps, dtype, zero_centered_gamma, {});
    else do_layernorm_forward(x, gamma, beta, y, mean, rstd, rows, cols, eps, dtype, zero_centered_gamma, {});
    if (rows > 0) do_cast_to_fp8(y, dtype, rows, cols, codes.format, codes.scale, codes.q, nullptr, codes.amax);
}

void Backend::swiglu_forward_fp8(const void* x, void* y, std::int64_t rows, std::int64_t cols, DType dtype,
                                 const Fp8Codes& codes) {
    check_rows(rows, cols, "swiglu_forward_fp8");
    GPT_REQUIRE(codes.scale && codes.q, InternalError, "swiglu_forward_fp8: needs a scale and the codes' buffer");
    do_swiglu_forward_fp8(x, y, rows, cols, dtype, codes);
}

void Backend::do_swiglu_forward_fp8(const void* x, void* y, std::int64_t rows, std::int64_t cols, DType dtype,
                                    const Fp8Codes& codes) {
    do_swiglu_forward(x, y, rows, cols, dtype);
    if (rows > 0) do_cast_to_fp8(y, dtype, rows, cols, codes.format, codes.scale, codes.q, nullptr, codes.amax);
}

void Backend::gelu_forward_fp8(const void* x, void* y, std::int64_t n, bool tanh_approx, DType dtype,
                               const Fp8Codes& codes) {
    check_size(n, "gelu_forward_fp8");
    GPT_REQUIRE(codes.scale && codes.q, InternalError, "gelu_forward_fp8: needs a scale and the codes' buffer");
    do_gelu_forward_fp8(x, y, n, tanh_approx, dtype, codes);
}

void Backend::do_gelu_forward_fp8(const void* x, void* y, std::int64_t n, bool tanh_approx, DType dtype,
                                  const Fp8Codes& codes) {
    do_gelu_forward(x, y, n, tanh_approx, dtype);
    if (n > 0) do_cast_to_fp8(y, dtype, 1, n, codes.format, codes.scale, codes.q, nullptr, codes.amax);
}

void Backend::squared_relu_forward_fp8(const void* x, void* y, std::int64_t n, DType dtype,
                                       const Fp8Codes& codes) {
    check_size(n, "squared_relu_forward_fp8");
    GPT_REQUIRE(codes.scale && codes.q, InternalError, "squared_relu_forward_fp8: needs a scale and the codes' buffer");
    do_squared_relu_forward_fp8(x, y, n, dtype, codes);
}

void Backend::do_squared_relu_forward_fp8(const void* x, void* y, std::int64_t n, DType dtype,
                                          const Fp8Codes& codes) {
    do_squared_relu_forward(x, y, n, dtype);
    if (n > 0) do_cast_to_fp8(y, dtype, 1, n, codes.format, codes.scale, codes.q, nullptr, codes.amax);
}

void Backend::rmsnorm_forward(const void* x, const void* gamma, void* y, float* rstd,
                              std::int64_t rows, std::int64_t cols, float eps, DType dtype,
                              bool zero_centered_gamma, const NormRows& at) {
    check_rows(rows, cols, "rmsnorm_forward");
    check_norm_rows(at, "rmsnorm_forward");
    do_rmsnorm_forward(x, gamma, y, rstd, rows, cols, eps, dtype, zero_centered_gamma, at);
}
void Backend::rmsnorm_backward(const void* dy, const void* x, const void* gamma,
                               const float* rstd, const void* dresidual, void* dx, float* dgamma,
                               std::int64_t rows, std::int64_t cols, DType dtype, bool zero_centered_gamma,
                               const NormRows& at) {
    check_rows(rows, cols, "rmsnorm_backward");
    check_norm_rows(at, "rmsnorm_backward");
    do_rmsnorm_backward(dy, x, gamma, rstd, dresidual, dx, dgamma, rows, cols, dtype, zero_centered_gamma, at);
}
void Backend::swiglu_forward(const void* x, void* y, std::int64_t rows, std::int64_t cols,
                             DType dtype) {
    check_rows(rows, cols, "swiglu_forward");
    do_swiglu_forward(x, y, rows, cols, dtype);
}
void Backend::squared_relu_forward(const void* x, void* y, std::int64_t n, DType dtype) {
    check_size(n, "squared_relu_forward");
    do_squared_relu_forward(x, y, n, dtype);
}
void Backend::squared_relu_backward(const void* dy, const void* x, void* dx, std::int64_t n, DType dtype) {
    check_size(n, "squared_relu_backward");
    do_squared_relu_backward(dy, x, dx, n, dtype);
}
void Backend::swiglu_backward(const void* dy, const void* x, void* dx, std::int64_t rows,
                              std::int64_t cols, DType dtype) {
    check_rows(rows, cols, "swiglu_backward");
    do_swiglu_backward(dy, x, dx, rows, cols, dtype);
}
void Backend::qkv_expand_forward(const QkvExpandArgs& a, const void* qkv_grouped, void* qkv) {
    check_qkv_expand(a, "qkv_expand_forward");
    do_qkv_expand_forward(a, qkv_grouped, qkv);
}
void Backend::qkv_expand_backward(const QkvExpandArgs& a, const void* dqkv, void* dqkv_grouped) {
    check_qkv_expand(a, "qkv_expand_backward");
    do_qkv_expand_backward(a, dqkv, dqkv_grouped);
}

std::size_t Backend::attention_saved_bytes(const AttentionArgs& a) const {
    check_attention(a);
    check_attention_limits(a);
    // fp32 whatever the activation dtype: the backward pass needs the softmax statistics at
    // full precision; the row log-sum-exp (flash) or the probabilities [b, np, s, s] (plain).
    const std::size_t rows = static_cast<std::size_t>(a.b * a.np * a.s);
    return sizeof(float) * (a.flash ? rows : rows * static_cast<std::size_t>(a.s));
}

void Backend::attention_forward(const AttentionArgs& a, const void* qkv, void* out, void* saved) {
    check_attention(a);
    check_attention_limits(a);
    do_attention_forward(a, qkv, out, saved);
}
void Backend::attention_backward(const AttentionArgs& a, const void* qkv, const void* out,
                                 const void* saved, const void* dout, void* dqkv) {
    check_attention(a);
    check_attention_limits(a);
    do_attention_backward(a, qkv, out, saved, dout, dqkv);
}

void Backend::embedding_forward(const std::int32_t* tokens, const void* table, void* out,
                                std::int64_t b, std::int64_t s, std::int64_t h,
                                std::int64_t vocab_start, std::int64_t vocab_end, DType dtype) {
    check_embedding(b, s, h, vocab_start, vocab_end, "embedding_forward");
    do_embedding_forward(tokens, table, out, b, s, h, vocab_start, vocab_end, dtype);
}
void Backend::embedding_backward(const std::int32_t* tokens, const void* dout, float* dtable,
                                 std::int64_t b, std::int64_t s, std::int64_t h,
                                 std::int64_t vocab_start, std::int64_t vocab_end, DType dtype) {
    check_embedding(b, s, h, vocab_start, vocab_end, "embedding_backward");
    do_embedding_backward(tokens, dout, dtable, b, s, h, vocab_start, vocab_end, dtype);
}
void Backend::position_embedding_forward(const void* table, void* out, std::int64_t b,
                                         std::int64_t s, std::int64_t h,
                                         std::int64_t first_position, DType dtype) {
    check_positions(b, s, h, first_position, "position_embedding_forward");
    do_position_embedding_forward(table, out, b, s, h, first_position, dtype);
}
void Backend::position_embedding_backward(const void* dout, float* dtable, std::int64_t b,
                                          std::int64_t s, std::int64_t h,
                                          std::int64_t first_position, DType dtype) {
    check_positions(b, s, h, first_position, "position_embedding_backward");
    do_position_embedding_backward(dout, dtable, b, s, h, first_position, dtype);
}

void Backend::cross_entropy_max(const void* logits, float* row_max, std::int64_t rows,
                                std::int64_t v, DType dtype) {
    check_rows(rows, v, "cross_entropy_max");
    do_cross_entropy_max(logits, row_max, rows, v, dtype);
}
void Backend::cross_entropy_sums(const void* logits, const std::int32_t* targets,
                                 const float* row_max, float* sum_exp, float* target_logit,
                                 std::int64_t rows, std::int64_t v, std::int64_t vocab_start,
                                 DType dtype) {
    check_rows(rows, v, "cross_entropy_sums");
    do_cross_entropy_sums(logits, targets, row_max, sum_exp, target_logit, rows, v, vocab_start,
                          dtype);
}
void Backend::cross_entropy_stats(const void* logits, const std::int32_t* targets,
                                  float* local_max, float* sum_exp, float* target_logit,
                                  std::int64_t rows, std::int64_t v, std::int64_t vocab_start,
                                  DType dtype) {
    check_rows(rows, v, "cross_entropy_stats");
    do_cross_entropy_stats(logits, targets, local_max, sum_exp, target_logit, rows, v,
                           vocab_start, dtype);
}
void Backend::cross_entropy_loss(const float* row_max, const float* sum_exp,
                                 const float* target_logit, float* loss, std::int64_t rows) {
    check_size(rows, "cross_entropy_loss");
    do_cross_entropy_loss(row_max, sum_exp, target_logit, loss, rows);
}
void Backend::cross_entropy_backward(const void* logits, const std::int32_t* targets,
                                     const float* row_max, const float* sum_exp,
                                     const float* dloss, void* dlogits, std::int64_t rows,
                                     std::int64_t v, std::int64_t vocab_start, DType dtype) {
    check_rows(rows, v, "cross_entropy_backward");
    do_cross_entropy_backward(logits, targets, row_max, sum_exp, dloss, dlogits, rows, v,
                              vocab_start, dtype);
}

void Backend::adam_step(const AdamArgs& a) {
    GPT_REQUIRE(a.n >= 0 && a.step >= 1, InternalError, "adam_step: n=", a.n, " step=", a.step);
    GPT_REQUIRE(a.n == 0 || (a.main_param && a.grad && a.exp_avg && a.exp_avg_sq),
                InternalError, "adam_step: null buffer");
    do_adam_step(a);
}
GradStats Backend::grad_stats(const float* g, std::int64_t n) {
    check_size(n, "grad_stats");
    return do_grad_stats(g, n);
}
double Backend::sum(const float* x, std::int64_t n) {
    check_size(n, "sum");
    return do_sum(x, n);
}

}  // namespace gpt
