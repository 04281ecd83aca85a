// The model a checkpoint holds, described by the run that saved it: its saved run
// (config/saved_run.hpp) gives the shape, the vocabulary and the tokenizer, so gpt_generate
// needs none of them repeated.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/saved_run.hpp"

namespace gpt::generation {

// The run's Config: the user's `flags` (training flags such as --device, --fp16,
// --tensor-model-parallel-size, --use-flash-attn) with the carried arguments of `saved`
// (config/checkpoint_args.hpp, as gpt_pretrain's --use-checkpoint-args takes them). A
// flag among the carried ones that contradicts the saved value throws UsageError naming
// both values, e.g. "--num-layers: 2 in the checkpoint FILE, 4 given". --vocab-file /
// --merge-file may point elsewhere (they are locations, the vocabulary size is checked by
// the tensors' shapes). A saved run without the model's shape is a DataError.
Config config_from_checkpoint(const SavedRun& saved, const std::vector<std::string>& flags);

}  // namespace gpt::generation
