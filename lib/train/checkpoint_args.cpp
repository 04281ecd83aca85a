#include "train/checkpoint_args.hpp"

#include <optional>
#include <set>

#include "config/checkpoint_args.hpp"
#include "config/validate.hpp"
#include "core/errors.hpp"
#include "train/run/first_checkpoint.hpp"
#include "train/state/saved_run_attributes.hpp"

namespace gpt::train {

std::string take_args_from_checkpoint(Config& cfg) {
    const CheckpointConfig& ck = cfg.checkpoint;
    if (!ck.use_checkpoint_args) return "";
    validate_checkpoint_args_flags(ck);
    const std::optional<FirstCheckpoint> first = open_first_checkpoint(ck);
    if (!first) return "--use-checkpoint-args: no checkpoint in --load " + ck.load + ", so the given flags stand";
    GPT_REQUIRE(first->reader != nullptr, DataError, "--use-checkpoint-args: checkpoint ", first->file,
                " cannot be opened to read the model's arguments; give them as flags");
    const std::optional<SavedRun> saved = read_saved_run(*first->reader);
    GPT_REQUIRE(saved.has_value(), DataError, "--use-checkpoint-args: checkpoint ", first->file,
                " holds no record of its run's arguments; give them as flags");
    const std::set<std::string> given(cfg.given_keys.begin(), cfg.given_keys.end());
    CarryRules rules;
    rules.tokenizer = !ck.no_use_tokenizer_model_from_checkpoint_args;
    rules.parallel = ck.use_mp_args_from_checkpoint_args;
    rules.hint = "leave it out; --use-checkpoint-args takes the model's arguments from the checkpoint";
    std::string line = "--use-checkpoint-args: from " + first->file + ":";
    const std::vector<std::string> taken = take_checkpoint_args(cfg, *saved, given, rules);
    for (std::size_t i = 0; i < taken.size(); ++i) line += (i ? ", " : " ") + taken[i];
    if (taken.empty()) line += " nothing (every argument was given)";
    return line;
}

}  // namespace gpt::train
