// GPT-2's pre-tokenisation, the regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// written out as a scanner. Leftmost-alternative semantics at each position give:
//   1. an apostrophe followed by s t m d / re ve ll (lower case only) is a piece;
//   2. else an optional ASCII space plus the maximal run of one class (letters, numbers or
//      "other": neither whitespace, letter nor number) is a piece;
//   3. else (whitespace) the maximal whitespace run is a piece if it reaches the end of the
//      text; otherwise all of it but its last character (which then starts the next piece,
//      e.g. " word"), or the single character when the run has only one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "text/unicode_tables.hpp"
#include "text/utf8.hpp"

namespace gpt::data {

namespace detail {

using unicode::CharClass;

// Classes of the ASCII range, kept inline because they decide the fast path.
inline CharClass ascii_class(unsigned char c) {
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return CharClass::Letter;
    if (c >= '0' && c <= '9') return CharClass::Number;
    if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return CharClass::Space;
    return CharClass::Other;
}

// Class and byte length of the character at s[i]. Bytes that are not valid UTF-8 (possible
// only through the raw-bytes API, never from a validated corpus) count as one Other byte each.
inline CharClass char_at(std::string_view s, std::size_t i, std::size_t& len) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
        len = 1;
        return ascii_class(c);
    }
    std::uint32_t cp = 0;
    int l = utf8::decode(s, i, cp);
    if (l == 0) {
        len = 1;
        return CharClass::Other;
    }
    len = static_cast<std::size_t>(l);
    return unicode::classify(cp);
}

}  // namespace detail

// Calls piece(begin, end) for each pre-token [begin, end) of text, in order; the pieces
// tile the text exactly.
template <typename Fn>
void for_each_piece(std::string_view s, Fn&& piece) {
    using detail::CharClass;
    const std::size_t n = s.size();
    std::size_t i = 0;
    while (i < n) {
        const std::size_t start = i;
        if (s[i] == '\'' && i + 1 < n) {
            char a = s[i + 1];
            if (a == 's' || a == 't' || a == 'm' || a == 'd') {
                piece(start, i + 2);
                i += 2;
                continue;
            }
            if (i + 2 < n) {
                char b = s[i + 2];
                if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
                    piece(start, i + 3);
                    i += 3;
                    continue;
                }
            }
        }
        std::size_t k = (s[i] == ' ' && i + 1 < n) ? i + 1 : i;
        std::size_t len = 0;
        CharClass cls = detail::char_at(s, k, len);
        if (cls == CharClass::Space && k != i) {
            k = i;  // the optional space is followed by whitespace: it belongs to the run
            len = 1;
        }
        if (cls != CharClass::Space) {
            std::size_t j = k + len;
            if (cls == CharClass::Letter) {
                // ASCII letters dominate English text; skip them without a full decode.
                while (j < n) {
                    unsigned char c = static_cast<unsigned char>(s[j]);
                    if (c < 0x80) {
                        if ((c | 0x20) < 'a' || (c | 0x20) > 'z') break;
                        ++j;
                        continue;
                    }
                    std::size_t l2;
                    if (detail::char_at(s, j, l2) != cls) break;
                    j += l2;
                }
            } else {
                std::size_t l2;
                while (j < n && detail::char_at(s, j, l2) == cls) j += l2;
            }
            piece(start, j);
            i = j;
            continue;
        }
        // Whitespace run starting at i.
        std::size_t j = i, last = i, count = 0;
        while (j < n) {
            std::size_t l2;
            if (detail::char_at(s, j, l2) != CharClass::Space) break;
            last = j;
            j += l2;
            ++count;
        }
        std::size_t end = (j == n || count == 1) ? j : last;
        piece(start, end);
        i = end;
    }
}

}  // namespace gpt::data
