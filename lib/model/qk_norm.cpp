#include "model/qk_norm.hpp"

namespace gpt::model {

NormRows query_rows(const ModelDims& d) {
    const std::int64_t per = d.heads / d.groups();
    return {per, per + 2, 0};
}

NormRows key_rows(const ModelDims& d) {
    const std::int64_t per = d.heads / d.groups();
    return {1, per + 2, per};
}

std::int64_t qk_norm_rows(const ModelDims& d, std::int64_t tokens) {
    return tokens * (d.local_heads() + d.local_groups());
}

namespace {
// One of the two norms, over the rows of the grouped QKV that `at` picks.
void one_forward(Backend& be, const ModelDims& d, const void* w, const void* b, const void* x, void* y,
                 float* mean, float* rstd, std::int64_t rows, const NormRows& at, float eps, DType t) {
    if (d.rmsnorm) be.rmsnorm_forward(x, w, y, rstd, rows, d.head_dim, eps, t, d.layernorm_1p, at);
    else be.layernorm_forward(x, w, b, y, mean, rstd, rows, d.head_dim, eps, t, d.layernorm_1p, at);
}
void one_backward(Backend& be, const ModelDims& d, const void* w, float* dw, float* db, void* dqkv, const void* x,
                  const float* mean, const float* rstd, std::int64_t rows, const NormRows& at, DType t) {
    if (d.rmsnorm) be.rmsnorm_backward(dqkv, x, w, rstd, nullptr, dqkv, dw, rows, d.head_dim, t, d.layernorm_1p, at);
    else be.layernorm_backward(dqkv, x, w, mean, rstd, nullptr, dqkv, dw, db, rows, d.head_dim, t, d.layernorm_1p, at);
}
}  // namespace

void qk_norm_forward(Backend& be, const ModelDims& d, const QkNormWeights& w, const void* x, void* y,
                     float* mean, float* rstd, std::int64_t tokens, float eps, DType dtype) {
    const std::int64_t q = tokens * d.local_heads(), k = tokens * d.local_groups();
    one_forward(be, d, w.q_w, w.q_b, x, y, mean, rstd, q, query_rows(d), eps, dtype);
    one_forward(be, d, w.k_w, w.k_b, x, y, mean + q, rstd + q, k, key_rows(d), eps, dtype);
}

void qk_norm_backward(Backend& be, const ModelDims& d, const QkNormWeights& w, const QkNormGrads& g,
                      void* dqkv, const void* x, const float* mean, const float* rstd, std::int64_t tokens,
                      DType dtype) {
    const std::int64_t q = tokens * d.local_heads(), k = tokens * d.local_groups();
    one_backward(be, d, w.q_w, g.q_w, g.q_b, dqkv, x, mean, rstd, q, query_rows(d), dtype);
    one_backward(be, d, w.k_w, g.k_w, g.k_b, dqkv, x, mean + q, rstd + q, k, key_rows(d), dtype);
}

}  // namespace gpt::model
