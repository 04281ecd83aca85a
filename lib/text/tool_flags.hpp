// What the offline text tools (preprocess_data, merge_datasets) add to the shared flag
// parser (config/flag_parser.hpp): their usage errors keep the wording they always had,
// Boost's text with " (see --help)", and a flag can be required without --help needing it.
#pragma once

#include <boost/program_options/options_description.hpp>
#include <string>
#include <vector>

#include "config/flag_parser.hpp"

namespace gpt::data {

// parse_flags, its UsageError's text followed by " (see --help)"; then, unless the command
// line is empty or has --help (the tool prints its usage), each of `required` must have been
// given: Boost's required_option, checked here because a Boost `required()` would fail inside
// parse_flags, before --help is seen ("the option '--NAME' is required but missing (see
// --help)"; Boost's order: by name).
ParsedFlags parse_tool_flags(const boost::program_options::options_description& flags,
                             const std::vector<std::string>& args, const std::vector<std::string>& required);

// The tool's --help: its flags as Boost prints them, caption first.
std::string tool_usage(const boost::program_options::options_description& flags);

}  // namespace gpt::data
