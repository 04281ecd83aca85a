// Megatron's load_args_from_checkpoint over a saved run (config/saved_run.hpp): the model's
// arguments and its tokenizer taken from the checkpoint where the user gave none, so
// gpt_generate and `gpt_pretrain --use-checkpoint-args` need them not repeated. Where
// Megatron lets most of the checkpoint's values silently replace a flag the user gave, a
// given flag that contradicts the checkpoint is refused here, naming both values.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/saved_run.hpp"

namespace gpt {

// The saved arguments that describe the model and its tokenizer (Megatron's names with
// underscores): the shape, every argument check_checkpoint_args compares that is a flag, the
// tokenizer's files and type, the sequence length and the dropouts.
const std::vector<std::string>& carried_arguments();
// --use-mp-args-from-checkpoint-args: the parallel layout's (TP, PP, the virtual stages and
// the pipeline split).
const std::vector<std::string>& carried_parallel_arguments();

struct CarryRules {
    bool tokenizer = true;   // the tokenizer's type and files (off: --no-use-tokenizer-model-from-checkpoint-args)
    bool parallel = false;   // carried_parallel_arguments too
    std::string hint;        // the refusal's HINT
};

// Sets in `out` every carried argument `saved` holds that is not in `given` (option keys with
// underscores: Config::given_keys). A given one must agree with the checkpoint, else
// UsageError "--hidden-size: 48 in the checkpoint FILE, 64 given. HINT: <rules.hint>"; the
// tokenizer files' locations may differ (the files may have moved), and a given
// --seq-length or dropout is the run's own (they change no stored tensor). A taken TP or PP
// counts as given (the planner keeps it). A saved run without the model's shape is a
// DataError.
// Returns "key value" for each value taken, for the log.
std::vector<std::string> take_checkpoint_args(Config& out, const SavedRun& saved, const std::set<std::string>& given,
                                              const CarryRules& rules);

}  // namespace gpt
