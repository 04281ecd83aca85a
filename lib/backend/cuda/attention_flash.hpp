// Flash attention kernels (attention_flash.cu) behind CudaBackend's attention entry points.
#pragma once

#include "backend/backend.hpp"

namespace gpt::cuda {

// Head dims up to this size (Megatron's 64, 80, 96, 128 included).
constexpr std::int64_t kMaxFlashHeadDim = 128;

// lse [b, np, s] fp32.
void flash_forward(const AttentionArgs& a, const void* qkv, void* out, float* lse);
// delta: fp32 scratch of b*np*s elements. dqkv is overwritten.
void flash_backward(const AttentionArgs& a, const void* qkv, const void* out, const float* lse,
                    const void* dout, void* dqkv, float* delta);

}  // namespace gpt::cuda
