// A flag bound to a variable of its own type: how every tool declares one (gpt_pretrain's
// option table, gpt_generate's and convert_checkpoint's flags), so a value is parsed, given
// its default and printed the same way whichever tool takes it. Parse with parse_flags
// (config/flag_parser.hpp).
#pragma once

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/value_semantic.hpp>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "config/enums.hpp"

namespace gpt {

// A value as the arguments table (and --help's defaults) print it: Megatron's True/False,
// None for an empty string or list, a double to the stream's 6 digits.
std::string flag_text(bool v);
std::string flag_text(int v);
std::string flag_text(std::int64_t v);
std::string flag_text(std::uint64_t v);
std::string flag_text(double v);
std::string flag_text(const std::string& v);
std::string flag_text(const std::vector<int>& v);
// The integers in `words`, each split further at whitespace; UsageError naming --flag and the
// word that is not one.
std::vector<int> int_list(const std::vector<std::string>& words, const char* flag);
std::string flag_text(const std::vector<std::string>& v);
template <OptionEnum E>
std::string flag_text(E v) {
    return flag_text(std::string(to_string(v)));
}

// Declares --name in `group`, parsed into *target, whose value now is the default: a bool is
// a switch, a list takes several words, an enum is read as text and parsed by its one table
// of spellings (enums.hpp; a bad value is one line naming the flag and the allowed values),
// any other type by its own conversion (a bad value names the flag). `name` must outlive
// the parse (a string literal).
template <typename T>
void add_flag(boost::program_options::options_description& group, const char* name, T* target, const char* help) {
    namespace po = boost::program_options;
    if constexpr (std::is_same_v<T, bool>) {
        group.add_options()(name, po::bool_switch(target), help);
    } else if constexpr (std::is_same_v<T, std::vector<int>>) {
        // Words of the command line, or an INI file's one value "16 16 5859375": each
        // whitespace-separated word an integer (int_list).
        group.add_options()(name,
                            po::value<std::vector<std::string>>()->multitoken()->notifier(
                                [target, name](const std::vector<std::string>& words) { *target = int_list(words, name); }),
                            help);
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
        group.add_options()(name, po::value<T>(target)->multitoken(), help);
    } else if constexpr (std::is_same_v<T, std::string>) {
        group.add_options()(name, po::value<T>(target)->default_value(*target), help);
    } else if constexpr (OptionEnum<T>) {
        group.add_options()(name,
                            po::value<std::string>()
                                ->default_value(std::string(to_string(*target)))
                                ->notifier([target, name](const std::string& v) { *target = parse_enum<T>(v, name); }),
                            help);
    } else {
        group.add_options()(name, po::value<T>(target)->default_value(*target, flag_text(*target)), help);
    }
}

// A flag given once per value, each occurrence adding one (gpt_generate's --prompt): the
// one kind of flag the last-occurrence rule of parse_flags leaves alone.
inline void add_repeated_flag(boost::program_options::options_description& group, const char* name,
                              std::vector<std::string>* target, const char* help) {
    namespace po = boost::program_options;
    group.add_options()(name, po::value<std::vector<std::string>>(target)->composing(), help);
}

}  // namespace gpt
