// The three GEMMs of a linear layer y = x W^T (+ b), W stored [out, in] as in Megatron,
// activations row-major [T, features]. Column- and row-parallel layers are these same calls
// on the local slice of W plus the tp_mappings communication around them.
#pragma once

#include <cstdint>

#include "backend/backend.hpp"

namespace gpt::model {

// y (T, out) = x (T, in) W^T (+ bias, or GELU(x W^T + bias) with the pre-activation in aux).
void linear_forward(Backend& be, const void* x, const void* w, void* y, std::int64_t tokens,
                    std::int64_t in, std::int64_t out, DType dtype,
                    GemmEpilogue epilogue = GemmEpilogue::None, const void* bias = nullptr,
                    void* aux = nullptr, bool tanh_gelu = false);
// dW (out, in) fp32 += dy^T (out, T) x (T, in): accumulates across micro-batches. With
// dbias, also dbias (out) fp32 += the column sums of dy, fused into the same GEMM.
void linear_weight_grad(Backend& be, const void* dy, const void* x, float* dw,
                        std::int64_t tokens, std::int64_t in, std::int64_t out, DType dtype,
                        float* dbias = nullptr);
// dx (T, in) = dy (T, out) W (out, in)   (overwritten). With gelu_pre (T, in), the layer's
// input was GELU(gelu_pre): dx is then also taken through GELU's backward, in the GEMM's
// epilogue where the backend can.
void linear_input_grad(Backend& be, const void* dy, const void* w, void* dx, std::int64_t tokens,
                       std::int64_t in, std::int64_t out, DType dtype, const void* gelu_pre = nullptr,
                       bool tanh_gelu = false);

}  // namespace gpt::model
