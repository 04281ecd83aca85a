// A strict, allocation-light JSON reader for the two JSON inputs of the data pipeline: loose-JSON
// corpus lines and the GPT-2 vocabulary. It accepts what Python's json.loads accepts (including
// NaN/Infinity and duplicate keys, last one wins) so that every line Megatron can read, we can.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpt::data {

// Cursor over one JSON text. Errors throw DataError "column C: what" (1-based byte column);
// callers prefix the file and line.
class JsonCursor {
public:
    explicit JsonCursor(std::string_view text) : s_(text) {}

    void skip_ws();
    bool at_end() {
        skip_ws();
        return i_ >= s_.size();
    }
    char peek();                       // next non-whitespace byte; fails at end of text
    void expect(char c);               // consumes c after whitespace
    bool consume(char c);              // consumes c when it is next
    void parse_string(std::string& out);   // appends the decoded (UTF-8) string; cursor at '"'
    void skip_value();
    // Skips the next value and returns its source text (a number, literal, or nested
    // value), for readers that interpret a few fields themselves (lib/hf's config.json).
    std::string_view take_value();
    std::int64_t parse_int();
    [[noreturn]] void fail(std::string_view what) const;

    // Calls fn(key) for each member of the object at the cursor; fn must consume the value.
    template <typename Fn>
    void for_each_member(Fn&& fn) {
        expect('{');
        if (consume('}')) return;
        std::string key;
        do {
            if (peek() != '"') fail("expected a string key");
            key.clear();
            parse_string(key);
            expect(':');
            fn(key);
        } while (consume(','));
        expect('}');
    }

private:
    void skip_value(int depth);
    std::uint32_t parse_hex4();

    std::string_view s_;
    std::size_t i_ = 0;
};

// One requested key of a corpus line: the text, or the list of texts, stored under it.
struct TextField {
    bool present = false;
    bool is_list = false;
    std::vector<std::string> parts;  // capacity reused from line to line
    std::size_t count = 0;           // parts[0, count) are this line's
};

// Parses one corpus line (a JSON object) and fills fields[k] for keys[k]. A requested key whose
// value is neither a string nor a list of strings is a DataError; a missing key leaves
// present = false (the caller decides). The object must be the whole line.
void parse_corpus_line(std::string_view line, const std::vector<std::string>& keys, std::vector<TextField>& fields);

}  // namespace gpt::data
