// Invalid and cut UTF-8 from token bytes becomes U+FFFD as Python's (and so HF's) decode
// with errors='replace' makes it; the expected strings are CPython 3's output.
#include <gtest/gtest.h>

#include "inference/text.hpp"

namespace gpt::inference {
namespace {

const std::string R = "\xEF\xBF\xBD";

TEST(Utf8Replace, MatchesPythonDecodeReplace) {
    const std::pair<std::string, std::string> cases[] = {
        {"plain ascii", "plain ascii"},
        {"\xE2\x82", R},                                  // a cut 3-byte character
        {"\xFF", R},                                      // never a UTF-8 byte
        {"a\xE2\x28\xA1", "a" + R + "(" + R},            // broken continuation, stray continuation
        {"\xF0\x9F\x98", R},                              // a cut emoji: one replacement
        {"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80"},         // the whole emoji
        {"\xED\xA0\x80", R + R + R},                      // a surrogate: not a maximal subpart
        {"\xC0\xAF", R + R},                              // overlong
        {"\xE0\x80\xAF", R + R + R},                      // overlong
        {"\xF4\x90\x80\x80", R + R + R + R},              // past U+10FFFF
        {"ab\xE2\x82\xAC" "d\x80", "ab\xE2\x82\xAC" "d" + R},
    };
    for (const auto& [in, want] : cases) EXPECT_EQ(utf8_replace_invalid(in), want) << in;
}

TEST(JsonString, EscapesWhatJsonRequires) {
    EXPECT_EQ(json_string("a\"b\\c\nd\te\x01\xC3\xA9"), "\"a\\\"b\\\\c\\nd\\te\\u0001\xC3\xA9\"");
}

}  // namespace
}  // namespace gpt::inference
