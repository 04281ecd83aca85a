// The exact mapping between our (Megatron's) Llama-style parameters (rope, RMSNorm, SwiGLU,
// grouped-query attention, no linear biases) and Hugging Face's LlamaForCausalLM
// (transformers' modeling_llama.py), in both directions, on fp32 host buffers:
// - nn.Linear stores [out, in] as Megatron does: no transposes.
// - Megatron's fused query_key_value orders its output rows [groups, heads/groups + 2, hd]
//   (each group's query heads, then its key, then its value); HF has q_proj [heads * hd],
//   k_proj and v_proj [kv_heads * hd], query head n in group n / (heads/groups).
// - SwiGLU's fc1 is [2, ffn, h]: [0] the gate (silu'd), [1] the up projection.
// - HF's rope is rotate_half: element i pairs with i + hd/2, as our default rope does.
//   --rotary-interleaved pairs (2i, 2i+1) with the same frequency i, so the q and k rows
//   of each head are permuted: our row 2i -> HF row i, our row 2i+1 -> HF row i + hd/2.
//   (Attention scores are q.k sums over all rows, so a common permutation of q and k rows
//   leaves them unchanged.) An import is always rotate_half (HF has no interleaved form).
// - The vocabulary padding as in gpt2_mapping.hpp (export drops it, import copies the last
//   real row), for the embeddings and the untied lm_head alike.
#pragma once

#include <cstdint>
#include <vector>

#include "hf/safetensors.hpp"
#include "model/param_layout.hpp"

namespace gpt::hf {

// The whole model (TP 1, one stage) laid out by `layout`; vocab: the real vocabulary.
std::vector<NamedTensor> megatron_to_llama(const model::ModelDims& d, const model::ParamLayout& layout,
                                           const float* flat, std::int64_t vocab);

// Fills `flat` from HF tensors (names with or without LlamaForCausalLM's "model." prefix).
// A tied model (no output_layer in `layout`) accepts a stored lm_head.weight only when it
// equals the embeddings. Throws DataError naming the tensor for a missing tensor, a wrong
// shape, or a tensor we would silently drop.
void llama_to_megatron(const SafetensorsFile& f, const model::ModelDims& d, const model::ParamLayout& layout,
                       std::int64_t vocab, float* flat);

}  // namespace gpt::hf
