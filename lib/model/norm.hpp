// The model's normalisation, LayerNorm or RMSNorm (--normalization), behind one call so
// the layers and the head do not branch on it. Parameter offsets are the flat buffers'
// (bias -1 under RMSNorm); mean is not written by RMSNorm.
#pragma once

#include <cstdint>

#include "model/pass_context.hpp"

namespace gpt::model {

void norm_forward(const PassContext& c, const void* x, std::int64_t w, std::int64_t b, void* y,
                  float* mean, float* rstd, std::int64_t rows);
// The same, and the FP8 codes of y in the same pass (Backend::norm_forward_fp8).
void norm_forward_fp8(const PassContext& c, const void* x, std::int64_t w, std::int64_t b, void* y,
                      float* mean, float* rstd, std::int64_t rows, const Backend::Fp8Codes& codes);
// dx = dnorm + dresidual (nullable; dx may alias dy or dresidual); parameter grads +=.
void norm_backward(const PassContext& c, const void* dy, const void* x, std::int64_t w,
                   std::int64_t b, const float* mean, const float* rstd, const void* dresidual,
                   void* dx, std::int64_t rows);

}  // namespace gpt::model
