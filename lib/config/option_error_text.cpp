#include "config/option_error_text.hpp"

#include <map>
#include <string>
#include <utility>

namespace gpt {

namespace po = boost::program_options;

namespace {

// Boost 1.74's error_with_option_name::what() replaces each placeholder until none is left,
// so a value that contains its own placeholder (`--tensor-model-parallel-size 0%value%`)
// never returns (found by fuzz_config). Build the message with one left-to-right pass
// instead: text that came from the user is never scanned again.
struct OptionErrorFields : po::error_with_option_name {
    using Map = std::map<std::string, std::string>;
    using Defaults = std::map<std::string, std::pair<std::string, std::string>>;
    static const Map& substitutions(const po::error_with_option_name& e) {
        return e.*(&OptionErrorFields::m_substitutions);
    }
    static const Defaults& defaults(const po::error_with_option_name& e) {
        return e.*(&OptionErrorFields::m_substitution_defaults);
    }
    static std::string prefix(const po::error_with_option_name& e) {
        return (e.*(&OptionErrorFields::get_canonical_option_prefix))();
    }
};

std::string named_error_text(const po::error_with_option_name& e) {
    std::map<std::string, std::string> subs = OptionErrorFields::substitutions(e);
    subs["canonical_option"] = e.get_option_name();
    subs["prefix"] = OptionErrorFields::prefix(e);
    std::string text = e.m_error_template;
    // A missing parameter: Boost replaces the token `from` by `to` in the template.
    for (const auto& [name, from_to] : OptionErrorFields::defaults(e)) {
        const auto it = subs.find(name);
        if (it != subs.end() && !it->second.empty()) continue;
        const std::string& from = from_to.first;
        for (std::size_t pos = 0; !from.empty() && (pos = text.find(from, pos)) != std::string::npos;
             pos += from_to.second.size())
            text.replace(pos, from.size(), from_to.second);
    }
    std::string out;
    for (std::size_t pos = 0; pos < text.size();) {
        const std::size_t open = text.find('%', pos);
        const std::size_t close = open == std::string::npos ? open : text.find('%', open + 1);
        if (close == std::string::npos) {
            out.append(text, pos, std::string::npos);
            break;
        }
        out.append(text, pos, open - pos);
        const auto it = subs.find(text.substr(open + 1, close - open - 1));
        if (it == subs.end()) {
            out.append(text, open, close - open);  // not a placeholder: keep the '%', rescan from the next
            pos = close;
        } else {
            out += it->second;
            pos = close + 1;
        }
    }
    return out;
}

}  // namespace

// what() for every program_options error, without Boost's looping substitution.
std::string option_error_text(const po::error& e) {
    if (const auto* named = dynamic_cast<const po::error_with_option_name*>(&e)) return named_error_text(*named);
    return e.what();
}

}  // namespace gpt
