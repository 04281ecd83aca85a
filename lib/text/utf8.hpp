// UTF-8 decoding, validation and encoding (RFC 3629: no overlongs, no surrogates, <= U+10FFFF).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace gpt::data::utf8 {

// Decodes the character at s[i]. Returns its byte length (1-4) and sets cp; an invalid or
// truncated sequence returns 0 (cp unset). i must be < s.size().
inline int decode(std::string_view s, std::size_t i, std::uint32_t& cp) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
    std::size_t left = s.size() - i;
    unsigned char c = p[0];
    if (c < 0x80) {
        cp = c;
        return 1;
    }
    auto cont = [&](std::size_t k) { return k < left && (p[k] & 0xC0) == 0x80; };
    if (c >= 0xC2 && c <= 0xDF) {
        if (!cont(1)) return 0;
        cp = (std::uint32_t(c & 0x1F) << 6) | (p[1] & 0x3F);
        return 2;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (!cont(1) || !cont(2)) return 0;
        std::uint32_t v = (std::uint32_t(c & 0x0F) << 12) | (std::uint32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
        if (v < 0x800 || (v >= 0xD800 && v <= 0xDFFF)) return 0;
        cp = v;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (!cont(1) || !cont(2) || !cont(3)) return 0;
        std::uint32_t v = (std::uint32_t(c & 0x07) << 18) | (std::uint32_t(p[1] & 0x3F) << 12) |
                          (std::uint32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
        if (v < 0x10000 || v > 0x10FFFF) return 0;
        cp = v;
        return 4;
    }
    return 0;
}

// Byte offset of the first invalid sequence, or npos when s is valid UTF-8.
inline std::size_t find_invalid(std::string_view s) {
    std::size_t i = 0, n = s.size();
    while (i < n) {
        // ASCII dominates real corpora: check 8 bytes at a time.
        if (i + 8 <= n) {
            std::uint64_t w;
            std::memcpy(&w, s.data() + i, 8);
            if ((w & 0x8080808080808080ull) == 0) {
                i += 8;
                continue;
            }
        }
        if (static_cast<unsigned char>(s[i]) < 0x80) {
            ++i;
            continue;
        }
        std::uint32_t cp;
        int len = decode(s, i, cp);
        if (len == 0) return i;
        i += static_cast<std::size_t>(len);
    }
    return std::string_view::npos;
}

inline void append(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

}  // namespace gpt::data::utf8
