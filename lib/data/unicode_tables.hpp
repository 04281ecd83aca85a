// Unicode character classes of GPT-2's pre-tokenisation pattern: \p{L}, \p{N} and \s.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpt::data::unicode {

struct CodePointRange {
    std::uint32_t first, last;  // inclusive
};

// Generated tables (unicode_tables.cpp; the Unicode version is named there).
extern const CodePointRange kLetterRanges[];
extern const std::size_t kLetterRanges_count;
extern const CodePointRange kNumberRanges[];
extern const std::size_t kNumberRanges_count;

// The classes the pattern distinguishes. Whitespace is the Unicode White_Space property,
// which is what \s means in the regex engines of the reference encoders.
enum class CharClass : std::uint8_t { Other = 0, Letter = 1, Number = 2, Space = 3 };

// Class of a code point (any value; out-of-range values are Other). Constant-time lookup
// through a two-stage table built once on first use (thread-safe static initialisation).
CharClass classify(std::uint32_t cp);

}  // namespace gpt::data::unicode
