// The values of --split and of the blend flags (--data-path, --train/valid/test-data-path) as
// Megatron reads them: pure functions of the flags, so validate() checks them before a dry
// run ends and lib/data builds from the same reading.
#pragma once

#include <array>
#include <string>
#include <vector>

namespace gpt {

// "969, 30, 1" (commas, slashes or spaces; missing parts are 0) -> fractions summing to 1.
// UsageError naming --split and the part that is wrong.
std::array<double, 3> parse_split(const std::string& split);

struct BlendEntry {
    double weight;  // as given; 1 for every prefix of an unweighted blend
    std::string prefix;
};

// "prefix", "p1 p2 ..." (mixed in proportion to their sizes) or "w1 p1 w2 p2 ..." (weights
// non-negative, finite, not all 0), from the words options.cpp split the values into.
// UsageError naming `flag` (e.g. "data-path") when the words fit none of these forms.
struct Blend {
    std::vector<BlendEntry> entries;
    bool weighted = false;
};
Blend parse_blend(const std::vector<std::string>& words, const std::string& flag);

// True when s is a whole number in strtod's syntax.
bool is_number(const std::string& s);

}  // namespace gpt
