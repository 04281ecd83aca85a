// gpt_pretrain's --use-checkpoint-args (Megatron's load_args_from_checkpoint): before the
// flags are validated, the model's arguments are taken from the checkpoint --load will try
// first (config/checkpoint_args.hpp says which and how).
#pragma once

#include <string>

#include "config/config.hpp"

namespace gpt::train {

// Collective-free, on every rank alike. Without --use-checkpoint-args: nothing, "". Else
// UsageError without --load; a fresh start (no checkpoint in --load) keeps the given flags,
// as Megatron does, and says so; a checkpoint that cannot be read or has no saved run is a
// DataError naming it. Returns the log line naming the file and the values taken.
std::string take_args_from_checkpoint(Config& cfg);

}  // namespace gpt::train
