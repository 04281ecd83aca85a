#include "config/flag_parser.hpp"

#include <boost/program_options/parsers.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/option_error_text.hpp"
#include "core/errors.hpp"
#include "core/strings.hpp"

namespace po = boost::program_options;

namespace gpt {

namespace {

// Every flag's name (without dashes), in the order the tool declared them: the candidates
// of a suggestion (ties go to the first).
std::vector<std::string> names_of(const po::options_description& flags) {
    std::vector<std::string> names;
    for (const auto& d : flags.options()) names.push_back(d->long_name());
    return names;
}

// `where` is "" for the command line, " in config file PATH" for an INI key.
[[noreturn]] void unknown_flag(std::string name, const std::string& where, const FlagRules& rules,
                               const std::vector<std::string>& candidates) {
    while (!name.empty() && name.front() == '-') name.erase(0, 1);
    const auto u = rules.unsupported.find(name);
    if (u != rules.unsupported.end())
        GPT_THROW(UsageError, "--", name, " is not supported", where, ": ", u->second);
    const std::string hint = closest_match(name, candidates);
    const bool key = !where.empty();
    const std::string what = key ? "unknown key '" + name + "'" + where : "unknown flag --" + name;
    if (hint.empty()) GPT_THROW(UsageError, what);
    GPT_THROW(UsageError, what, "; did you mean ", key ? "" : "--", hint, "?");
}

// argparse's rule: a flag given twice keeps its last value, so scripts can append overrides
// to a base command line; a repeated flag (composing) keeps every value. Groups are
// "--flag [values...]".
std::vector<std::string> last_occurrence_wins(const std::vector<std::string>& args, const po::options_description& flags) {
    std::vector<std::vector<std::string>> groups;
    for (const auto& a : args) {
        if (a.rfind("--", 0) == 0 || groups.empty()) groups.push_back({a});
        else groups.back().push_back(a);
    }
    auto flag_of = [](const std::vector<std::string>& g) {
        const std::string& f = g.front();
        return f.rfind("--", 0) == 0 ? f.substr(0, f.find('=')) : std::string();
    };
    auto repeated = [&](const std::string& f) {
        const po::option_description* d = f.size() > 2 ? flags.find_nothrow(f.substr(2), false) : nullptr;
        return d && d->semantic()->is_composing();
    };
    std::vector<std::string> out;
    for (std::size_t i = 0; i < groups.size(); ++i) {
        const std::string f = flag_of(groups[i]);
        bool later = false;
        if (!f.empty() && !repeated(f))
            for (std::size_t j = i + 1; j < groups.size(); ++j) later |= flag_of(groups[j]) == f;
        if (!later) out.insert(out.end(), groups[i].begin(), groups[i].end());
    }
    return out;
}

// The words the tool does not take itself, for the parser after it; a flag that parser
// does not take either is refused here, with the closest name of both.
std::vector<std::string> passed_on(const po::parsed_options& parsed, const FlagRules& rules,
                                   const std::vector<std::string>& candidates) {
    std::vector<std::string> words = po::collect_unrecognized(parsed.options, po::include_positional);
    for (const std::string& w : words) {
        if (w.rfind("--", 0) != 0 || w.size() == 2) continue;  // a value or stray word: the next parser's
        const std::string name = w.substr(2, w.find('=') - 2);
        if (std::find(rules.pass_on.begin(), rules.pass_on.end(), name) == rules.pass_on.end())
            unknown_flag(name, "", rules, candidates);
    }
    return words;
}

// The INI file `path` names: its keys below the command line's (the first value stored wins).
void store_config_file(const std::string& path, const po::options_description& flags, const FlagRules& rules,
                       const std::vector<std::string>& candidates, po::variables_map& values) {
    const std::string flag = "--" + rules.config_flag;
    std::ifstream in(path);
    if (!in) GPT_THROW(UsageError, "cannot read config file '", path, "' (", flag, ")");
    // A folder opens as an empty stream on Linux: it would silently give no options.
    GPT_REQUIRE(!std::filesystem::is_directory(path), UsageError, "config file '", path, "' (", flag,
                ") is a directory, not an INI file");
    try {
        po::store(po::parse_config_file(in, flags, false), values);
    } catch (const po::unknown_option& e) {
        unknown_flag(e.get_option_name(), " in config file " + path, rules, candidates);
    } catch (const po::error& e) {
        GPT_THROW(UsageError, "config file ", path, ": ", option_error_text(e));
    }
}

}  // namespace

ParsedFlags parse_flags(const po::options_description& flags, const std::vector<std::string>& args,
                        const FlagRules& rules) {
    ParsedFlags out;
    std::vector<std::string> candidates = names_of(flags);
    candidates.insert(candidates.end(), rules.pass_on.begin(), rules.pass_on.end());
    // Reject abbreviations (argparse would guess them): a typo must never silently pick a flag.
    const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing &
                      ~po::command_line_style::allow_sticky;
    try {
        out.args = last_occurrence_wins(args, flags);
        po::command_line_parser parser(out.args);
        parser.options(flags).style(style);
        if (!rules.pass_on.empty()) parser.allow_unregistered();
        const po::parsed_options parsed = parser.run();
        if (!rules.pass_on.empty()) out.passed_on = passed_on(parsed, rules, candidates);
        po::store(parsed, out.values);
        if (!rules.config_flag.empty() && out.values.count(rules.config_flag))
            store_config_file(out.values[rules.config_flag].as<std::string>(), flags, rules, candidates, out.values);
        po::notify(out.values);
    } catch (const po::unknown_option& e) {
        unknown_flag(e.get_option_name(), "", rules, candidates);
    } catch (const po::error& e) {
        GPT_THROW(UsageError, option_error_text(e));
    }
    return out;
}

std::string flags_usage(const std::string& header, const std::vector<const po::options_description*>& groups) {
    std::ostringstream os;
    os << header;
    for (const po::options_description* g : groups) os << "\n" << *g;
    return os.str();
}

}  // namespace gpt
