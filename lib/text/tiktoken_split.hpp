// Pre-tokenisation of the tiktoken encodings, the regexes of cl100k_base (= Llama 3's),
// o200k_base and Megatron's TikTokenizer patterns v1 / v2, written out as a scanner:
//   cl100k_base: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//                | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   o200k_base:  [^\r\n\p{L}\p{N}]?U*W+C?|[^\r\n\p{L}\p{N}]?U+W*C?|\p{N}{1,3}
//                | ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//     with U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], W = [\p{Ll}\p{Lm}\p{Lo}\p{M}] and C the
//     contractions (?i:'s|'t|'re|'ve|'m|'ll|'d);
//   Megatron v1: [^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+
//   Megatron v2: o200k_base without C and with \p{N} for \p{N}{1,3}.
// The regex engines (fancy-regex in tiktoken) take the first alternative that matches at a
// position, each quantifier greedy with backtracking; every position matches some
// alternative, so the pieces tile the text. What backtracking amounts to, per alternative:
//   - the optional prefix [^\r\n\p{L}\p{N}] (any whitespace but CR/LF, punctuation, marks)
//     is taken when the rest matches after it, else the rest is tried without it;
//   - U*W+: the maximal U run, then a W run; when no W follows, the run gives back its
//     characters until one that is also in W (Lm Lo M are in both) ends the match;
//   - \s*[\r\n]+ (and v1's \s*[\r\n]): the whitespace run up to its last CR/LF, inclusive;
//   - \s+(?!\S): the whole run at the end of the text, else the run but its last character;
//   - (?i) makes 's also match 'S; not 'ſ (U+017F, which case-folds to s): tiktoken's
//     engine matches it as "'" then a letter, and so do we (the tests check this case).
// \s is Unicode White_Space. Bytes that are not valid UTF-8 (only through the raw-bytes API;
// a validated corpus has none) count as one character in no class.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "text/unicode_tables.hpp"
#include "text/utf8.hpp"

namespace gpt::data {

enum class TikPattern { V1, V2, Cl100k, O200k };

namespace tik_detail {

using namespace unicode;

struct Spec {
    bool contraction_first;   // cl100k: contractions are their own first alternative
    bool cased;               // o200k, v2: U*W+ | U+W* instead of \p{L}+
    bool contraction_suffix;  // o200k: C? after the letters
    int max_digits;           // 3, or 1 for Megatron's patterns
    bool slash_tail;          // o200k, v2: [\r\n/]* after punctuation, else [\r\n]*
};

inline constexpr Spec spec_of(TikPattern p) {
    switch (p) {
        case TikPattern::V1: return {false, false, false, 1, false};
        case TikPattern::V2: return {false, true, false, 1, true};
        case TikPattern::Cl100k: return {true, false, false, 3, false};
        case TikPattern::O200k: return {false, true, true, 3, true};
    }
    return {};
}

// Class bits and byte length of the character at s[i] (i < s.size()).
inline std::uint8_t bits_at(std::string_view s, std::size_t i, std::size_t& len) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
        len = 1;
        if (c >= 'a' && c <= 'z') return kTikL | kTikLower;
        if (c >= 'A' && c <= 'Z') return kTikL | kTikUpper;
        if (c >= '0' && c <= '9') return kTikN;
        if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return kTikSpace;
        return 0;
    }
    std::uint32_t cp = 0;
    const int l = utf8::decode(s, i, cp);
    if (l == 0) {
        len = 1;
        return 0;
    }
    len = static_cast<std::size_t>(l);
    return tik_bits(cp);
}

inline bool is_crlf(char c) { return c == '\r' || c == '\n'; }
inline bool is_other(std::uint8_t b) { return (b & (kTikL | kTikN | kTikSpace)) == 0; }

// Length of (?i:'s|'t|'re|'ve|'m|'ll|'d) at s[i], or 0.
inline std::size_t contraction_at(std::string_view s, std::size_t i) {
    const std::size_t n = s.size();
    if (i + 1 >= n || s[i] != '\'') return 0;
    const char a = static_cast<char>(s[i + 1] | 0x20);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 < n) {
        const char b = static_cast<char>(s[i + 2] | 0x20);
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    }
    return 0;
}

// End of the maximal run from j of characters having any of the bits in mask.
inline std::size_t run_end(std::string_view s, std::size_t j, std::uint8_t mask) {
    std::size_t len = 0;
    while (j < s.size() && (bits_at(s, j, len) & mask)) j += len;
    return j;
}

// U*W+ from start: end of the match, or 0 when it does not match (start < end always).
inline std::size_t upper_then_lower(std::string_view s, std::size_t start) {
    std::size_t j = start, len = 0, last_lower_end = 0;
    while (j < s.size()) {
        const std::uint8_t b = bits_at(s, j, len);
        if (!(b & kTikUpper)) break;
        if (b & kTikLower) last_lower_end = j + len;
        j += len;
    }
    if (j < s.size() && (bits_at(s, j, len) & kTikLower)) return run_end(s, j, kTikLower);
    return last_lower_end;  // the run gives back down to its last character that is in W
}

}  // namespace tik_detail

// Calls piece(begin, end) for each pre-token [begin, end) of s, in order.
template <typename Fn>
void for_each_tik_piece(std::string_view s, TikPattern pattern, Fn&& piece) {
    using namespace tik_detail;
    const Spec sp = spec_of(pattern);
    const std::size_t n = s.size();
    std::size_t i = 0;
    while (i < n) {
        if (sp.contraction_first) {
            if (const std::size_t c = contraction_at(s, i)) {
                piece(i, i + c);
                i += c;
                continue;
            }
        }
        std::size_t len0 = 0;
        const std::uint8_t b0 = bits_at(s, i, len0);
        const bool prefix = !(b0 & (kTikL | kTikN)) && !is_crlf(s[i]) && i + len0 < n;
        // Letters, with the optional prefix character.
        std::size_t end = 0;
        if (sp.cased) {
            if (prefix) end = upper_then_lower(s, i + len0);
            if (!end) end = upper_then_lower(s, i);
            if (!end) {
                std::size_t len = 0;
                if (prefix && (bits_at(s, i + len0, len) & kTikUpper))
                    end = run_end(s, run_end(s, i + len0, kTikUpper), kTikLower);
                else if (b0 & kTikUpper)
                    end = run_end(s, run_end(s, i, kTikUpper), kTikLower);
            }
            if (end && sp.contraction_suffix) end += contraction_at(s, end);
        } else {
            std::size_t len = 0;
            if (b0 & kTikL) end = run_end(s, i, kTikL);
            else if (prefix && (bits_at(s, i + len0, len) & kTikL)) end = run_end(s, i + len0, kTikL);
        }
        if (end) {
            piece(i, end);
            i = end;
            continue;
        }
        // Numbers: \p{N}{1,3} or \p{N}.
        if (b0 & kTikN) {
            std::size_t j = i + len0, len = 0;
            for (int k = 1; k < sp.max_digits && j < n && (bits_at(s, j, len) & kTikN); ++k) j += len;
            piece(i, j);
            i = j;
            continue;
        }
        // Punctuation: ' '?[^\s\p{L}\p{N}]+ then [\r\n]* or [\r\n/]*.
        std::size_t k = n;
        if (is_other(b0)) {
            k = i;
        } else if (s[i] == ' ' && i + 1 < n) {
            std::size_t len = 0;
            if (is_other(bits_at(s, i + 1, len))) k = i + 1;
        }
        if (k < n) {
            std::size_t j = k, len = 0;
            while (j < n && is_other(bits_at(s, j, len))) j += len;
            while (j < n && (is_crlf(s[j]) || (sp.slash_tail && s[j] == '/'))) ++j;
            piece(i, j);
            i = j;
            continue;
        }
        // Whitespace run [i, j).
        std::size_t j = i, last = i, after_newline = 0, count = 0, len = 0;
        while (j < n && (bits_at(s, j, len) & kTikSpace)) {
            if (is_crlf(s[j])) after_newline = j + 1;
            last = j;
            j += len;
            ++count;
        }
        if (after_newline) end = after_newline;        // \s*[\r\n]+
        else if (j == n || count == 1) end = j;        // \s+(?!\S) at the end, or \s+
        else end = last;                               // \s+(?!\S): all but the last
        // Only reachable with inconsistent tables (a letter in none of U and W): make progress.
        if (count == 0) end = i + len0;
        piece(i, end);
        i = end;
    }
}

}  // namespace gpt::data
