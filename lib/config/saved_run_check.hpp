// Megatron's check_checkpoint_args: a checkpoint loads only into a model whose tensors mean
// the same. Shapes alone do not say it: 4 heads of 64 and 8 heads of 32 store the same
// [3h, h] query_key_value weight, read differently. The checkpoint's saved run
// (config/saved_run.hpp) is compared with the run's Config, argument by argument.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/saved_run.hpp"

namespace gpt {

// The arguments compared, with Megatron's names. Values are compared as resolved: an
// ffn_hidden_size of 0 means 4 x hidden_size, a max_position_embeddings of 0 the
// seq_length, and the GELU kind ("gelu") follows --openai-gelu and --no-bias-gelu-fusion. An
// argument the checkpoint does not hold (saved by an older build) or holds as None (not
// known then: an empty string or list, a vocabulary taken from the tokenizer) is not
// compared. Everything else may change between save and load: the parallel layout (TP, PP,
// DP, virtual stages, distributed optimizer), the precision (fp32/fp16/bf16), batch sizes,
// the learning-rate schedule, dropout, recompute, intervals.
const std::vector<std::string>& meaning_arguments();

// Throws UsageError listing every compared argument whose values differ, both values and
// the checkpoint named, e.g. "--num-attention-heads: 4 in the checkpoint, 8 in this run".
void check_checkpoint_args(const SavedRun& saved, const Config& run);

}  // namespace gpt
