// utf8::decode / find_invalid / append against a reference written from RFC 3629's grammar
// (byte ranges per lead byte, no arithmetic), so the two share no code or formulation.
#include <cstdint>
#include <string>

#include "text/utf8.hpp"
#include "fuzz_util.hpp"

namespace {

// RFC 3629 section 4: the allowed range of each byte of a sequence, by lead byte.
// Returns the sequence length at s[i] (0: invalid or truncated).
int reference_length(std::string_view s, std::size_t i) {
    auto b = [&](std::size_t k) { return static_cast<unsigned>(static_cast<unsigned char>(s[i + k])); };
    auto in = [&](std::size_t k, unsigned lo, unsigned hi) { return i + k < s.size() && b(k) >= lo && b(k) <= hi; };
    const unsigned c = b(0);
    if (c <= 0x7F) return 1;
    if (c >= 0xC2 && c <= 0xDF) return in(1, 0x80, 0xBF) ? 2 : 0;
    if (c == 0xE0) return in(1, 0xA0, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
    if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
    if (c == 0xED) return in(1, 0x80, 0x9F) && in(2, 0x80, 0xBF) ? 3 : 0;
    if (c == 0xF0) return in(1, 0x90, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
    if (c >= 0xF1 && c <= 0xF3) return in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
    if (c == 0xF4) return in(1, 0x80, 0x8F) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
    return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace gpt::data;
    const std::string_view s(reinterpret_cast<const char*>(data), size);
    std::size_t first_bad = std::string_view::npos;
    for (std::size_t i = 0; i < s.size(); ++i) {
        // Every offset, not only sequence starts: decode must be right wherever it is asked.
        std::uint32_t cp = 0xFFFFFFFF;
        const int len = utf8::decode(s, i, cp);
        const int ref = reference_length(s, i);
        if (len != ref)
            gpt::fuzz::fail("decode at byte " + std::to_string(i) + " gave length " + std::to_string(len) +
                            ", RFC 3629 says " + std::to_string(ref));
        if (len > 0) {
            std::string one;
            utf8::append(one, cp);
            if (one != s.substr(i, static_cast<std::size_t>(len)))
                gpt::fuzz::fail("append(decode(x)) != x at byte " + std::to_string(i));
        }
    }
    // The first invalid offset walking sequence by sequence, as find_invalid must report it.
    for (std::size_t i = 0; i < s.size();) {
        const int ref = reference_length(s, i);
        if (ref == 0) {
            first_bad = i;
            break;
        }
        i += static_cast<std::size_t>(ref);
    }
    if (utf8::find_invalid(s) != first_bad)
        gpt::fuzz::fail("find_invalid gave " + std::to_string(utf8::find_invalid(s)) + ", expected " +
                        std::to_string(first_bad));
    return 0;
}
