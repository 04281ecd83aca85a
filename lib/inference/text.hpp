// Text out of token bytes: GPT-2 BPE tokens are bytes, and a completion cut anywhere may end
// inside a UTF-8 character or hold invalid bytes.
#pragma once

#include <string>
#include <string_view>

namespace gpt::inference {

// Valid UTF-8 from arbitrary bytes: each maximal ill-formed subsequence (Unicode's
// "substitution of maximal subparts", what Python's bytes.decode('utf-8', 'replace') and
// so HF's tokenizer decode do) becomes one U+FFFD.
std::string utf8_replace_invalid(std::string_view bytes);

// s as a JSON string literal (quotes included); s must be valid UTF-8.
std::string json_string(std::string_view s);

}  // namespace gpt::inference
