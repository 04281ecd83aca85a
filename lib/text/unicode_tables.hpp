// Unicode character classes of the pre-tokenisation patterns: GPT-2's \p{L}, \p{N} and \s, and
// the case classes of o200k_base / Megatron's tiktoken v2 (\p{Lu} \p{Ll} \p{Lt} \p{Lm} \p{Lo} \p{M}).
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
extern const CodePointRange kLuRanges[], kLlRanges[], kLtRanges[], kLmRanges[], kLoRanges[], kMRanges[];
extern const std::size_t kLuRanges_count, kLlRanges_count, kLtRanges_count, kLmRanges_count,
    kLoRanges_count, kMRanges_count;

// The classes the pattern distinguishes. Whitespace is the Unicode White_Space property,
// which is what \s means in the regex engines of the reference encoders.
enum class CharClass : std::uint8_t { Other = 0, Letter = 1, Number = 2, Space = 3 };

// Class of a code point (any value; out-of-range values are Other). Constant-time lookup
// through a two-stage table built once on first use (thread-safe static initialisation).
CharClass classify(std::uint32_t cp);

// The classes the tiktoken patterns test, as bits (a code point may be in several):
// \p{L}, \p{N}, \s (White_Space), o200k's "upper" set [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and
// its "lower" set [\p{Ll}\p{Lm}\p{Lo}\p{M}]. Note \p{M} is in neither L nor N.
enum TikBits : std::uint8_t { kTikL = 1, kTikN = 2, kTikSpace = 4, kTikUpper = 8, kTikLower = 16 };
std::uint8_t tik_bits(std::uint32_t cp);

}  // namespace gpt::data::unicode
