// The exact mapping between our (Megatron's) GPT parameters and Hugging Face's GPT-2
// (transformers' modeling_gpt2.py), in both directions, on fp32 host buffers:
// - HF's Conv1D stores weights [in, out] (y = x W + b); Megatron's linear layers [out, in]:
//   every matrix is transposed.
// - Megatron's fused query_key_value orders its 3h output rows [heads, 3, head_dim] (so a
//   tensor-parallel slice is whole heads); HF's c_attn splits its 3h output columns as
//   [q | k | v], each [heads, head_dim].
// - Megatron pads the vocabulary (make-vocab-size-divisible-by x TP); HF's wte has exactly
//   vocab_size rows. Export drops the padding rows; import fills them with copies of the
//   last real row, as Megatron's own checkpoint converter (tools/checkpoint) does. The
//   padding rows' logits take part in our softmax, never in HF's: logits of real tokens are
//   identical, probabilities differ by the padding rows' share.
// - The LM head is tied to wte in both (GPT2LMHeadModel's lm_head.weight is not stored).
#pragma once

#include <cstdint>
#include <vector>

#include "hf/safetensors.hpp"
#include "model/param_layout.hpp"

namespace gpt::hf {

// The whole model (TP 1, one pipeline stage) as a flat fp32 buffer laid out by `layout`
// (ParamLayout of ChunkSpec{0, L, true, true}). vocab: the real (unpadded) vocabulary.
std::vector<NamedTensor> megatron_to_hf(const model::ModelDims& d, const model::ParamLayout& layout,
                                        const float* flat, std::int64_t vocab);

// Fills `flat` (laid out by `layout`) from HF tensors. Names are accepted with or without
// GPT2LMHeadModel's "transformer." prefix; HF's attention-mask buffers (attn.bias,
// attn.masked_bias) are ignored; a stored lm_head.weight must equal wte (tied). Throws
// DataError naming the tensor for a missing tensor, a shape that disagrees with the config,
// an untied head, or a tensor we would silently drop.
void hf_to_megatron(const SafetensorsFile& f, const model::ModelDims& d, const model::ParamLayout& layout,
                    std::int64_t vocab, float* flat);

}  // namespace gpt::hf
