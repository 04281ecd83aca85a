#include "text/merge_options.hpp"

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/value_semantic.hpp>

#include "config/flag_binding.hpp"
#include "text/tool_flags.hpp"

namespace po = boost::program_options;

namespace gpt::data {

namespace {

po::options_description merge_flags(MergeArgs& a) {
    po::options_description g("merge_datasets: concatenate Megatron .bin/.idx datasets");
    g.add_options()("help,h", po::bool_switch(&a.help), "show this help");
    // Declared as before (add_flag's list has the same text): --help prints it unchanged.
    g.add_options()("input", po::value(&a.inputs)->multitoken(),
                    "a folder (every <name>.bin/.idx pair in it, sorted by name) or a list of dataset prefixes");
    add_flag(g, "output-prefix", &a.output_prefix, "writes <prefix>.bin/.idx");
    return g;
}

}  // namespace

std::string merge_usage() {
    MergeArgs defaults;
    return tool_usage(merge_flags(defaults));
}

MergeArgs parse_merge_args(const std::vector<std::string>& args) {
    MergeArgs a;
    parse_tool_flags(merge_flags(a), args, {"input", "output-prefix"});
    return a;
}

}  // namespace gpt::data
