#include "text/tool_flags.hpp"

#include <algorithm>
#include <sstream>

#include "core/errors.hpp"

namespace gpt::data {

ParsedFlags parse_tool_flags(const boost::program_options::options_description& flags,
                             const std::vector<std::string>& args, const std::vector<std::string>& required) {
    ParsedFlags parsed;
    try {
        parsed = parse_flags(flags, args);
    } catch (const UsageError& e) {
        GPT_THROW(UsageError, e.what(), " (see --help)");
    }
    const auto help = parsed.values.find("help");
    if (args.empty() || (help != parsed.values.end() && help->second.as<bool>())) return parsed;
    std::vector<std::string> names = required;
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
        // A flag bound by add_flag always has a value (its default): only one given counts.
        const auto it = parsed.values.find(name);
        GPT_REQUIRE(it != parsed.values.end() && !it->second.defaulted() && !it->second.empty(), UsageError,
                    "the option '--", name, "' is required but missing (see --help)");
    }
    return parsed;
}

std::string tool_usage(const boost::program_options::options_description& flags) {
    std::ostringstream os;
    os << flags;
    return os.str();
}

}  // namespace gpt::data
