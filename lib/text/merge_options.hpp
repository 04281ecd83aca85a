// merge_datasets' flags (Megatron's tools/merge_datasets.py), in the style every tool shares
// (config/flag_parser.hpp).
#pragma once

#include <string>
#include <vector>

namespace gpt::data {

struct MergeArgs {
    // One folder (every <name>.bin/.idx pair in it, sorted by name) or dataset prefixes.
    std::vector<std::string> inputs;
    std::string output_prefix;  // writes <prefix>.bin/.idx
    bool help = false;
};

// UsageError for a bad flag or a missing --input / --output-prefix (Boost's text followed by
// " (see --help)", as the tool always printed it); with --help or no argument, no checks.
MergeArgs parse_merge_args(const std::vector<std::string>& args);
std::string merge_usage();

}  // namespace gpt::data
