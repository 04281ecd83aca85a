#include "generation/checkpoint_args.hpp"

#include <set>

#include "config/checkpoint_args.hpp"
#include "config/options.hpp"

namespace gpt::generation {

Config config_from_checkpoint(const SavedRun& saved, const std::vector<std::string>& flags) {
    Config out = parse_args(flags).config;
    const std::set<std::string> given(out.given_keys.begin(), out.given_keys.end());
    take_checkpoint_args(out, saved, given,
                         {true, false, "leave it out; gpt_generate takes the model's arguments from the checkpoint"});
    return out;
}

}  // namespace gpt::generation
