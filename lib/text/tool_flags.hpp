// What the offline text tools (preprocess_data, merge_datasets) add to the shared flag
// parser (config/flag_parser.hpp): their usage errors keep the wording they always had,
// Boost's text with " (see --help)", and a flag can be required without --help needing it.
#pragma once

#include <boost/program_options/options_description.hpp>
#include <string>
#include <vector>

#include "config/flag_parser.hpp"

namespace gpt::data {

// parse_flags, its UsageError's text followed by " (see --help)".
ParsedFlags parse_tool_flags(const boost::program_options::options_description& flags,
                             const std::vector<std::string>& args);

// Boost's required_option, checked by the tool once it knows --help was not asked for (a
// Boost `required()` fails in parse_flags, before --help is seen): UsageError "the option
// '--NAME' is required but missing (see --help)" unless --NAME was on the command line.
void require_flag(const ParsedFlags& parsed, const std::string& name);

}  // namespace gpt::data
