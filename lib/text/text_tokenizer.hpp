// What the preprocessing pipeline needs of a tokenizer (GPT-2 BPE or TikTokenizer): the
// unpadded vocabulary size (it picks the .bin dtype), the end-of-document id, and one
// encoder per worker thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace gpt::data {

class TextEncoder {
public:
    virtual ~TextEncoder() = default;
    virtual void encode(std::string_view text, std::vector<std::int32_t>& out) = 0;  // appends
};

class TextTokenizer {
public:
    virtual ~TextTokenizer() = default;
    virtual int vocab_size() const = 0;      // unpadded
    virtual std::int32_t eod() const = 0;
    // Not thread-safe: give each thread its own.
    virtual std::unique_ptr<TextEncoder> make_encoder() const = 0;
};

}  // namespace gpt::data
