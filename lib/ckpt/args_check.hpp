// Megatron's check_checkpoint_args: a checkpoint loads only into a model whose tensors mean
// the same. Shapes alone do not say it: 4 heads of 64 and 8 heads of 32 store the same
// [3h, h] query_key_value weight, read differently. The checkpoint's "config" attribute
// (the resolved arguments table that gpt_pretrain prints and saves) is compared with the
// run's, argument by argument.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gpt::ckpt {

class CheckpointReader;

// The arguments compared, with Megatron's names. Values are compared as resolved: an
// ffn_hidden_size of 0 means 4 x hidden_size, a max_position_embeddings of 0 the
// seq_length, and the GELU kind follows --openai-gelu and --no-bias-gelu-fusion. An
// argument missing from either table (a checkpoint of an older build, or a flag that does
// not exist yet) is not compared. Everything else may change between save and load: the
// parallel layout (TP, PP, DP, virtual stages, distributed optimizer), the precision
// (fp32/fp16/bf16), batch sizes, the learning-rate schedule, dropout, recompute, intervals.
const std::vector<std::string>& meaning_arguments();

// The "  key ....... value" rows of a saved arguments table (format_arguments), by key.
std::map<std::string, std::string> parse_arguments_table(const std::string& table);

// Throws UsageError listing every compared argument whose values differ, both values and
// the file named, e.g. "--num-attention-heads: 4 in the checkpoint, 8 in this run".
void check_checkpoint_args(const std::string& saved_table, const std::string& run_table, const std::string& file);
// The same with the reader's "config" attribute; a checkpoint without one is not checked.
void check_checkpoint_args(const CheckpointReader& reader, const std::string& run_table);

}  // namespace gpt::ckpt
