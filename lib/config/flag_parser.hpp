// The one command-line style of our tools (gpt_pretrain, gpt_generate, convert_checkpoint):
// Boost.ProgramOptions over the flags add_flag declared (config/flag_binding.hpp), with the
// habits Megatron's argparse users have and none of its guesses. Every error is one
// UsageError line naming the flag: an unknown flag with the closest valid name, a bad value,
// a missing or unreadable INI file.
#pragma once

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/variables_map.hpp>
#include <map>
#include <string>
#include <vector>

namespace gpt {

struct FlagRules {
    // The flag naming an INI file of more flags (keys are the names without dashes; the
    // command line wins over the file). Empty: the tool reads no file.
    std::string config_flag;
    // Flags refused by name with the reason (Megatron flags a tool does not implement),
    // rather than as unknown typos.
    std::map<std::string, std::string> unsupported;
    // Flags another parser takes after this one (gpt_generate passes gpt_pretrain's on):
    // their words come back in ParsedFlags::passed_on, for that parser to read and check;
    // an unknown flag is matched against these and the tool's own for the suggestion.
    std::vector<std::string> pass_on;
};

struct ParsedFlags {
    boost::program_options::variables_map values;
    // The command line as parsed: a flag given twice kept once, with its last value.
    std::vector<std::string> args;
    // The words of the FlagRules::pass_on flags (and any stray word), in their order.
    std::vector<std::string> passed_on;
};

// Parses `args` (without the program name) into the variables `flags` bound, then runs
// their notifiers. argparse's rules: a flag given twice keeps its last value (scripts append
// overrides), except a repeated flag (add_repeated_flag), which keeps them all. Never a guess:
// neither abbreviations nor sticky short flags. Throws UsageError.
ParsedFlags parse_flags(const boost::program_options::options_description& flags, const std::vector<std::string>& args,
                        const FlagRules& rules = {});

// A tool's --help: `header`, then each group's flags with their help and defaults.
std::string flags_usage(const std::string& header,
                        const std::vector<const boost::program_options::options_description*>& groups);

}  // namespace gpt
