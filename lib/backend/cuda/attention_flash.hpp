// Flash attention kernels (attention_flash.cu) behind CudaBackend's attention entry points.
#pragma once

#include <initializer_list>

#include "backend/backend.hpp"

namespace gpt::cuda {

// Head dims up to this size (Megatron's 64, 80, 96, 128 included).
constexpr std::int64_t kMaxFlashHeadDim = 128;

// Which kernels run: Auto picks the tensor-core ones where they apply; Simple forces the
// CUDA-core kernels everywhere (also set by GPT_CUDA_FLASH=simple in the environment); Sm90
// is Auto with the sm_90 wgmma kernels where the device and the call allow them:
//  - Sm90 (GPT_CUDA_FLASH=sm90): the forward on the warp-specialised kernel
//    (attention_flash_sm90_ws.cu) where flash_forward_uses_sm90_ws says so, else the basic
//    one (attention_flash_sm90.cu) where it applies, and the backward on
//    attention_flash_sm90_bwd.cu where flash_backward_uses_sm90 says so;
//  - Sm90Fwd (GPT_CUDA_FLASH=sm90-fwd): the same forward, the backward the sm80 one;
//  - Sm90Basic (GPT_CUDA_FLASH=sm90-basic): the basic sm_90 forward, the sm80 backward;
//  - Sm90Bwd1wg (GPT_CUDA_FLASH=sm90-bwd-1wg): Sm90's kernels, but the backward the
//    one-warpgroup double-buffered variant of attention_flash_sm90_bwd.cu (Sm90's has two
//    warpgroups on 128 keys);
//  - Sm90BwdPlain (GPT_CUDA_FLASH=sm90-bwd-plain): the same with its unpipelined variant;
//  - Sm90DqAtomic (GPT_CUDA_FLASH=sm90-dq-atomic): Sm90's kernels, the backward's dQ partials
//    by float2 atomics instead of bulk reductions;
//  - Sm90BwdWs (GPT_CUDA_FLASH=sm90-bwd-ws): Sm90's kernels, the backward warp-specialised
//    (a producer warpgroup loading by TMA before Sm90's two).
// Document masking (AttentionArgs::doc_start) is in the sm80 and the simple kernels only: a
// call with it runs sm80's forward and backward under every Sm90* choice, on Hopper too.
enum class FlashKernel { Auto, Simple, Sm90, Sm90Fwd, Sm90Basic, Sm90Bwd1wg, Sm90BwdPlain, Sm90DqAtomic, Sm90BwdWs };
void set_flash_kernel(FlashKernel k);
FlashKernel flash_kernel();  // the current choice (the first call reads GPT_CUDA_FLASH)
// Whether a call with these arguments and tensors runs on tensor cores: fp16/bf16, head dim
// 64, 80, 96 or 128, every tensor 16-byte aligned, not forced simple.
bool flash_uses_tensor_cores(const AttentionArgs& a, std::initializer_list<const void*> tensors);

// Whether flash_forward runs on an sm_90 kernel: FlashKernel::Sm90, Sm90Fwd or Sm90Basic, an
// sm_90 device, no dropout, fp16/bf16, flash_uses_tensor_cores, and a head dim the kernel has
// (warp-specialised: 64, 96, 128; basic: 64, 128). Never with document masking (doc_start
// set): the sm_90 kernels lack it, the sm80 forward runs.
bool flash_forward_uses_sm90(const AttentionArgs& a, std::initializer_list<const void*> tensors);
// Whether that kernel is the warp-specialised one (FlashKernel::Sm90, Sm90Fwd, Sm90Bwd1wg,
// Sm90BwdPlain, Sm90DqAtomic or Sm90BwdWs); false with doc_start set, as above.
bool flash_forward_uses_sm90_ws(const AttentionArgs& a, std::initializer_list<const void*> tensors);
// Whether flash_backward runs on the sm_90 kernel: FlashKernel::Sm90, Sm90Bwd1wg, Sm90BwdPlain, Sm90DqAtomic or
// Sm90BwdWs, an
// sm_90 device, fp16/bf16, head dim 64, 96 or 128 (dropout and grouped K/V included), and
// flash_uses_tensor_cores; elsewhere the sm80 backward (or the CUDA-core one). Never with
// document masking (doc_start set): the sm_90 backward lacks it, the sm80 one runs.
bool flash_backward_uses_sm90(const AttentionArgs& a, std::initializer_list<const void*> tensors);
// The variants of that backward (attention_flash_sm90_bwd.cu); dK and dV are the same to the
// bit in all three, dQ's fp32 partial sums are grouped differently:
//  - TwoWarpgroups (FlashKernel::Sm90): two warpgroups on 128 keys a block, sharing each
//    query tile's Q, dO and statistics (double-buffered), each computing half of dQ's
//    columns over all 128 keys: per key, half the tile loads and dQ atomics of one warpgroup;
//  - OneWarpgroup (Sm90Bwd1wg): one warpgroup on 64 keys, double-buffered (cp.async
//    prefetch of the next query tile, float2 dQ atomics);
//  - Plain (Sm90BwdPlain): one warpgroup, unpipelined loads, scalar atomics;
//  - TwoWarpgroups (FlashKernel::Sm90) adds each warpgroup's dQ partial of a step into the
//    fp32 scratch by one bulk reduction of the tensor memory accelerator (FlashAttention-3's
//    way), from shared memory into a tile-contiguous scratch (flash_dq_scratch_floats) that
//    its own final kernel puts in place; TwoWarpgroupsAtomicDq (Sm90DqAtomic) is the same
//    kernel with float2 atomics into the row-major scratch, as the other two;
//  - WarpSpecialized (Sm90BwdWs): TwoWarpgroups as consumers behind a producer warpgroup
//    that loads K, V, each step's Q, dO (by TMA) and statistics into the two buffers
//    (FlashAttention-3's structure; the consumers issue no copy and share no block barrier
//    with it); the same products in the same order, so dQ, dK and dV equal TwoWarpgroups'.
//    Not at head dim 128 with dropout, where its consumers' 240 registers (setmaxnreg's
//    most beside a producer) spill: that case runs TwoWarpgroups.
enum class Sm90Bwd { Plain, OneWarpgroup, TwoWarpgroups, TwoWarpgroupsAtomicDq, WarpSpecialized };
// The variant FlashKernel selects (meaningful where flash_backward_uses_sm90 is true).
Sm90Bwd flash_backward_sm90_variant();
// Test hook: the emulator reports compute capability 8.0; with this on, the "device is
// sm_90" check of flash_forward_uses_sm90 (and _backward_) passes on any device (the emulator runs the wgmma
// kernel; a real pre-Hopper GPU would trap, so only tests on the emulator set it), and the
// emulator takes sm_90's limits (compute capability 9.0, 227 KiB of shared memory a block).
void flash_assume_sm90_device_for_tests(bool on);
// Whether the current device is sm_90 (or the hook above is on).
bool flash_device_is_sm90();

// How the sm80 backward (the default tensor-core one) draws its dropout mask: false
// (GPT_CUDA_DROPOUT_DRAWS=word, the default) a word of keep bits a thread and step from whole
// Philox blocks, a quarter of the draws; true (element) one Philox block per fragment
// element, the kernel before, for comparison. The same mask bit for bit. The first call
// reads the environment (UsageError for another value); the setter overrides it (tests).
// With document masking (AttentionArgs::doc_start) the backward draws words either way (its
// element variant spills with the mask); the forward follows the choice.
bool flash_dropout_draws_per_element();
void set_flash_dropout_draws_per_element(bool on);

// lse [b, np, s] fp32.
void flash_forward(const AttentionArgs& a, const void* qkv, void* out, float* lse,
                   const Stream& stream);
// The fp32 dQ scratch flash_backward needs on tensor cores: s rounded up to whole 64-query
// tiles (the bulk-reduction backward's tiles) x pairs x hn.
std::size_t flash_dq_scratch_floats(std::int64_t s, std::int64_t pairs, std::int64_t hn);
// delta: fp32 scratch of b*np*s elements; dq_acc: fp32 scratch of
// flash_dq_scratch_floats(s, b*np, hn) elements when flash_uses_tensor_cores(a, {qkv, out,
// dout, dqkv}), else unused. dqkv is overwritten.
void flash_backward(const AttentionArgs& a, const void* qkv, const void* out, const float* lse,
                    const void* dout, void* dqkv, float* delta, float* dq_acc,
                    const Stream& stream);

}  // namespace gpt::cuda
