// The one loader of a model from a checkpoint: the fp32 main parameters (and for training the
// Adam moments) of this rank's slices, from any saved layout (TP, PP, DP, distributed
// optimizer), over the slice lists of checkpoint_slices.hpp. The trainer's resume reads into
// its chunks (and optimizer shards); gpt_generate and the converter read the whole model of
// one TP rank into a flat buffer. The main parameters, never the stored model weights: the
// model in any precision is their rounding, so a bf16/fp16 run loads without a second rounding.
#pragma once

#include <cstdint>
#include <vector>

#include "ckpt/checkpoint_reader.hpp"
#include "model/param_layout.hpp"
#include "train/state/checkpoint_slices.hpp"

namespace gpt::train {

// The padded vocabulary as stored: the rows of the word embeddings (any TP size may have
// padded them). Throws DataError when the checkpoint lacks the tensor.
std::int64_t stored_vocab_rows(const ckpt::CheckpointReader& r);

// Collective over the reader's ranks, in one read: every tensor's optimizer/main_param slice
// (and with `adam_moments` its exp_avg and exp_avg_sq) into `host` wherever this rank holds
// it (distributed-optimizer shards: this rank's flat run). The moments share the call with the
// main parameters: both are optimizer state, replicated or sharded alike.
void load_model_state(ckpt::CheckpointReader& r, const std::vector<TensorBinding>& tensors,
                      std::vector<ChunkHost>& host, bool adam_moments);

// The fp32 main parameters of the whole model `layout` describes (a ChunkSpec{0, L, true,
// true} layout; its entries' slices are its TP rank's), as a flat buffer shaped like it (the
// alignment padding between entries zero).
std::vector<float> load_model_state(ckpt::CheckpointReader& r, const model::ParamLayout& layout);

}  // namespace gpt::train
