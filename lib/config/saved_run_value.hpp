// One value of a saved run (config/saved_run.hpp) as its "type value" text and back: the
// typed format's tokens, apart from the line and key handling around them.
#pragma once

#include <string>
#include <string_view>

#include "config/option_value.hpp"

namespace gpt::saved_run_value {

// "bool", "int", "uint", "double", "str", "ints" or "strs".
const char* type_name(const OptionValue& v);

// The value's text: exact (doubles by their shortest round trip) and printable ASCII only.
std::string encode(const OptionValue& v);

// The value `text` of type `type`, the whole text consumed. Throws std::invalid_argument
// saying what is wrong.
OptionValue decode(std::string_view type, std::string_view text);

}  // namespace gpt::saved_run_value
