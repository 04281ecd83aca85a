// Megatron's --qk-layernorm: every query and key head normalised over its hn dims (the
// model's --normalization, one weight for the queries and one for the keys, shared by all
// heads) right after the QKV linear and before rope. The rows are picked out of Megatron's
// grouped QKV [T, ng, np/ng + 2, hn] in place (Backend's NormRows), the values untouched,
// so no copy of Q or K is made for the norm.
#pragma once

#include <cstdint>

#include "backend/backend.hpp"
#include "model/model_spec.hpp"

namespace gpt::model {

// The query rows (each group's np/ng, first in the group) and the key rows (one per
// group, after its queries) of the grouped QKV.
NormRows query_rows(const ModelDims& d);
NormRows key_rows(const ModelDims& d);
// fp32 statistics per norm: T np/tp query rows, then T ng/tp key rows.
std::int64_t qk_norm_rows(const ModelDims& d, std::int64_t tokens);

struct QkNormWeights {
    const void* q_w = nullptr;
    const void* q_b = nullptr;  // nullptr under RMSNorm
    const void* k_w = nullptr;
    const void* k_b = nullptr;
};
struct QkNormGrads {
    float* q_w = nullptr;
    float* q_b = nullptr;
    float* k_w = nullptr;
    float* k_b = nullptr;
};

// y (may alias x): the grouped QKV of `tokens` rows with its query and key rows normalised;
// mean and rstd [qk_norm_rows] (mean unused under RMSNorm). Only the normalised rows of y
// are written.
void qk_norm_forward(Backend& be, const ModelDims& d, const QkNormWeights& w, const void* x, void* y,
                     float* mean, float* rstd, std::int64_t tokens, float eps, DType dtype);
// dqkv's query and key rows replaced by the gradient of the norms' inputs (x, the grouped
// QKV before the norms), in place; the value rows are already theirs. Grads +=.
void qk_norm_backward(Backend& be, const ModelDims& d, const QkNormWeights& w, const QkNormGrads& g,
                      void* dqkv, const void* x, const float* mean, const float* rstd, std::int64_t tokens,
                      DType dtype);

}  // namespace gpt::model
