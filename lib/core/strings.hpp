// Small string helpers shared by config parsing and error messages.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpt {

// Levenshtein distance, used to suggest the closest valid flag or key.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to word, or "" when none is reasonably close.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

std::vector<std::string> split_whitespace(std::string_view s);
std::string trim(std::string_view s);

}  // namespace gpt
