// A flag's value as data rather than text: what a checkpoint's saved run stores per flag
// (config/saved_run.hpp). The option table (options.cpp) gives every flag a getter and a
// setter of this type beside its printer, so the saved run covers each new flag by itself.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "config/enums.hpp"

namespace gpt {

struct Config;

// Every integer type keeps its own alternative (the seed is unsigned 64-bit), so no value is
// narrowed or reinterpreted; an enum is its flag spelling, so a stored value reads the same
// whatever order a later build gives the enumerators.
using OptionValue = std::variant<bool, std::int64_t, std::uint64_t, double, std::string, std::vector<std::int64_t>,
                                 std::vector<std::string>>;

struct OptionField {
    std::string key;  // Megatron's name with underscores, as in the arguments table
    std::function<OptionValue(const Config&)> get;
    // Takes the alternative `get` returns. Throws UsageError for an enum spelling this build
    // does not have, std::out_of_range for an integer the field cannot hold.
    std::function<void(Config&, const OptionValue&)> set;
};

// The text a value has in the arguments table, for messages ("None" for an empty string or
// list, True/False), but a double the table's 6 digits would round prints in full: two
// values that differ never print alike.
std::string option_value_text(const OptionValue& v);

// The table prints an empty string or list as None: a value nobody set.
bool option_value_unset(const OptionValue& v);

namespace option_value {

inline OptionValue to(bool v) { return v; }
inline OptionValue to(int v) { return std::int64_t{v}; }
inline OptionValue to(std::int64_t v) { return v; }
inline OptionValue to(std::uint64_t v) { return v; }
inline OptionValue to(double v) { return v; }
inline OptionValue to(const std::string& v) { return v; }
inline OptionValue to(const std::vector<std::string>& v) { return v; }
inline OptionValue to(const std::vector<int>& v) { return std::vector<std::int64_t>(v.begin(), v.end()); }
template <OptionEnum E>
OptionValue to(E v) {
    return std::string(to_string(v));
}

inline int narrow(std::int64_t v) {
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
        throw std::out_of_range(std::to_string(v) + " does not fit a 32-bit integer");
    return static_cast<int>(v);
}

inline void from(const OptionValue& v, bool& out, const char*) { out = std::get<bool>(v); }
inline void from(const OptionValue& v, int& out, const char*) { out = narrow(std::get<std::int64_t>(v)); }
inline void from(const OptionValue& v, std::int64_t& out, const char*) { out = std::get<std::int64_t>(v); }
inline void from(const OptionValue& v, std::uint64_t& out, const char*) { out = std::get<std::uint64_t>(v); }
inline void from(const OptionValue& v, double& out, const char*) { out = std::get<double>(v); }
inline void from(const OptionValue& v, std::string& out, const char*) { out = std::get<std::string>(v); }
inline void from(const OptionValue& v, std::vector<std::string>& out, const char*) {
    out = std::get<std::vector<std::string>>(v);
}
inline void from(const OptionValue& v, std::vector<int>& out, const char*) {
    out.clear();
    for (std::int64_t x : std::get<std::vector<std::int64_t>>(v)) out.push_back(narrow(x));
}
template <OptionEnum E>
void from(const OptionValue& v, E& out, const char* flag) {
    out = parse_enum<E>(std::get<std::string>(v), flag);
}

}  // namespace option_value
}  // namespace gpt
