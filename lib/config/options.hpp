// Binds the Config structs to Megatron-LM's flag names, from an INI file (--config FILE,
// keys without the dashes: `num-layers = 48`) and the command line (which overrides the file),
// in the style every tool shares (config/flag_parser.hpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "config/flag_parser.hpp"
#include "config/option_value.hpp"

namespace gpt {

struct ParsedArgs {
    Config config;
    bool help = false;
};

// Throws UsageError for an unknown flag or key (with the closest valid name), a bad value,
// or a missing/unreadable --config file.
ParsedArgs parse_args(int argc, const char* const* argv);
// The same from a list of arguments (without the program name), for tests and tools.
ParsedArgs parse_args(const std::vector<std::string>& args);

// Every flag with its help text and default, grouped like Megatron's argument groups.
std::string usage_text();

// Megatron's sorted "arguments" table of every resolved value (rank 0 prints it), with
// `extra` rows (the environment variables that change the run) sorted in.
std::string format_arguments(const Config& cfg,
                             const std::vector<std::pair<std::string, std::string>>& extra = {});

// Names of every accepted flag (without dashes).
std::vector<std::string> option_names();

// The rules of a tool that passes gpt_pretrain's flags on to parse_args (gpt_generate): their
// names (option_names()), and the Megatron flags refused by name, as parse_args refuses them.
FlagRules pretrain_flags_passed_on();

// Every flag's typed getter and setter, keyed by its arguments-table name (underscores), in
// the option table's order: what a checkpoint's saved run stores.
const std::vector<OptionField>& option_fields();

}  // namespace gpt
