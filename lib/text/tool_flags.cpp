#include "text/tool_flags.hpp"

#include "core/errors.hpp"

namespace gpt::data {

ParsedFlags parse_tool_flags(const boost::program_options::options_description& flags,
                             const std::vector<std::string>& args) {
    try {
        return parse_flags(flags, args);
    } catch (const UsageError& e) {
        GPT_THROW(UsageError, e.what(), " (see --help)");
    }
}

void require_flag(const ParsedFlags& parsed, const std::string& name) {
    // A flag bound by add_flag always has a value (its default): only one given counts.
    const auto it = parsed.values.find(name);
    GPT_REQUIRE(it != parsed.values.end() && !it->second.defaulted() && !it->second.empty(), UsageError,
                "the option '--", name, "' is required but missing (see --help)");
}

}  // namespace gpt::data
