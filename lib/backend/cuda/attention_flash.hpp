// Flash attention kernels (attention_flash.cu) behind CudaBackend's attention entry points.
#pragma once

#include <initializer_list>

#include "backend/backend.hpp"

namespace gpt::cuda {

// Head dims up to this size (Megatron's 64, 80, 96, 128 included).
constexpr std::int64_t kMaxFlashHeadDim = 128;

// Which kernels run: Auto picks the tensor-core ones where they apply; Simple forces the
// CUDA-core kernels everywhere (also set by GPT_CUDA_FLASH=simple in the environment).
enum class FlashKernel { Auto, Simple };
void set_flash_kernel(FlashKernel k);
FlashKernel flash_kernel();  // the current choice (the first call reads GPT_CUDA_FLASH)
// Whether a call with these arguments and tensors runs on tensor cores: fp16/bf16, head dim
// 64, 80, 96 or 128, every tensor 16-byte aligned, not forced simple.
bool flash_uses_tensor_cores(const AttentionArgs& a, std::initializer_list<const void*> tensors);

// lse [b, np, s] fp32.
void flash_forward(const AttentionArgs& a, const void* qkv, void* out, float* lse,
                   const Stream& stream);
// delta: fp32 scratch of b*np*s elements; dq_acc: fp32 scratch of s*b*np*hn elements when
// flash_uses_tensor_cores(a, {qkv, out, dout, dqkv}), else unused. dqkv is overwritten.
void flash_backward(const AttentionArgs& a, const void* qkv, const void* out, const float* lse,
                    const void* dout, void* dqkv, float* delta, float* dq_acc,
                    const Stream& stream);

}  // namespace gpt::cuda
