// The model a checkpoint holds, described by the arguments it was trained with: the
// "config" attribute (the resolved arguments table gpt_pretrain prints and saves) gives the
// shape, the vocabulary and the tokenizer, so gpt_generate needs none of them repeated.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace gpt::generation {

// The saved arguments that describe the model and its tokenizer (Megatron's names with
// underscores), carried from the checkpoint into the generation run.
const std::vector<std::string>& carried_arguments();

// The run's Config: the carried arguments of `saved` (a parsed arguments table, see
// ckpt::parse_arguments_table) plus the user's `flags` (training flags such as --device,
// --fp16, --tensor-model-parallel-size, --use-flash-attn). A flag among the carried ones
// that contradicts the saved value throws UsageError naming both values, e.g.
// "--num-layers: 2 in the checkpoint FILE, 4 given". --vocab-file / --merge-file may point
// elsewhere (they are locations, the vocabulary size is checked by the tensors' shapes).
Config config_from_checkpoint(const std::map<std::string, std::string>& saved,
                              const std::vector<std::string>& flags, const std::string& file);

}  // namespace gpt::generation
