#include "text/json.hpp"

#include <cstring>

#include "core/errors.hpp"
#include "text/utf8.hpp"

namespace gpt::data {

namespace {
// Python's json module nests through recursion; it fails near depth 1000. Refuse earlier
// than our own stack would.
constexpr int kMaxDepth = 512;

bool is_json_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
}  // namespace

void JsonCursor::fail(std::string_view what) const {
    GPT_THROW(DataError, "column ", i_ + 1, ": ", what);
}

void JsonCursor::skip_ws() {
    while (i_ < s_.size() && is_json_ws(s_[i_])) ++i_;
}

char JsonCursor::peek() {
    skip_ws();
    if (i_ >= s_.size()) fail("unexpected end of JSON text");
    return s_[i_];
}

void JsonCursor::expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
}

bool JsonCursor::consume(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
}

std::uint32_t JsonCursor::parse_hex4() {
    if (i_ + 4 > s_.size()) fail("truncated \\u escape");
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
        char c = s_[i_++];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= std::uint32_t(c - '0');
        else if (c >= 'a' && c <= 'f') v |= std::uint32_t(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= std::uint32_t(c - 'A' + 10);
        else fail("invalid \\u escape");
    }
    return v;
}

void JsonCursor::parse_string(std::string& out) {
    ++i_;  // opening quote
    const std::size_t n = s_.size();
    for (;;) {
        std::size_t run = i_;
        // Copy the longest plain run at once: corpus text is mostly plain.
        while (run < n) {
            unsigned char c = static_cast<unsigned char>(s_[run]);
            if (c == '"' || c == '\\' || c < 0x20) break;
            ++run;
        }
        out.append(s_.data() + i_, run - i_);
        i_ = run;
        if (i_ >= n) fail("unterminated string");
        char c = s_[i_];
        if (c == '"') {
            ++i_;
            return;
        }
        if (c != '\\') fail("control character in string (JSON requires it escaped)");
        if (++i_ >= n) fail("unterminated escape");
        char e = s_[i_++];
        switch (e) {
            case '"': out.push_back('"'); break;
            case '\\': out.push_back('\\'); break;
            case '/': out.push_back('/'); break;
            case 'b': out.push_back('\b'); break;
            case 'f': out.push_back('\f'); break;
            case 'n': out.push_back('\n'); break;
            case 'r': out.push_back('\r'); break;
            case 't': out.push_back('\t'); break;
            case 'u': {
                std::uint32_t cp = parse_hex4();
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    // A high surrogate must pair with a low one to be a character; Python
                    // accepts a lone one but cannot encode it as UTF-8 for the tokenizer.
                    if (i_ + 6 <= n && s_[i_] == '\\' && s_[i_ + 1] == 'u') {
                        i_ += 2;
                        std::uint32_t lo = parse_hex4();
                        if (lo < 0xDC00 || lo > 0xDFFF) fail("unpaired UTF-16 surrogate in \\u escape");
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    } else {
                        fail("unpaired UTF-16 surrogate in \\u escape");
                    }
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    fail("unpaired UTF-16 surrogate in \\u escape");
                }
                utf8::append(out, cp);
                break;
            }
            default: fail(std::string("invalid escape '\\") + e + "'");
        }
    }
}

std::int64_t JsonCursor::parse_int() {
    skip_ws();
    bool neg = consume('-');
    if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9') fail("expected an integer");
    std::int64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (v > (INT64_MAX - 9) / 10) fail("integer too large");
        v = v * 10 + (s_[i_++] - '0');
    }
    if (i_ < s_.size() && (s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E')) fail("expected an integer");
    return neg ? -v : v;
}

void JsonCursor::skip_value() { skip_value(0); }

std::string_view JsonCursor::take_value() {
    skip_ws();
    const std::size_t begin = i_;
    skip_value(0);
    return s_.substr(begin, i_ - begin);
}

void JsonCursor::skip_value(int depth) {
    if (depth > kMaxDepth) fail("JSON nested too deeply");
    char c = peek();
    auto literal = [&](std::string_view word) {
        if (s_.substr(i_, word.size()) != word) fail("invalid literal");
        i_ += word.size();
    };
    switch (c) {
        case '"': {
            std::string scratch;
            parse_string(scratch);
            return;
        }
        case '{':
            for_each_member([&](const std::string&) { skip_value(depth + 1); });
            return;
        case '[':
            ++i_;
            if (consume(']')) return;
            do skip_value(depth + 1);
            while (consume(','));
            expect(']');
            return;
        case 't': literal("true"); return;
        case 'f': literal("false"); return;
        case 'n': literal("null"); return;
        case 'N': literal("NaN"); return;
        case 'I': literal("Infinity"); return;
        default: break;
    }
    // Number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?  or -Infinity (Python extension).
    if (c == '-') {
        ++i_;
        if (s_.substr(i_, 8) == "Infinity") {
            i_ += 8;
            return;
        }
    }
    auto digits = [&] {
        std::size_t b = i_;
        while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
        return i_ - b;
    };
    if (i_ < s_.size() && s_[i_] == '0') ++i_;
    else if (digits() == 0) fail("invalid JSON value");
    if (i_ < s_.size() && s_[i_] == '.') {
        ++i_;
        if (digits() == 0) fail("invalid number");
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
        ++i_;
        if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
        if (digits() == 0) fail("invalid number");
    }
}

void parse_corpus_line(std::string_view line, const std::vector<std::string>& keys, std::vector<TextField>& fields) {
    fields.resize(keys.size());
    for (auto& f : fields) {
        f.present = false;
        f.is_list = false;
        f.count = 0;
    }
    JsonCursor cur(line);
    if (cur.peek() != '{') cur.fail("expected a JSON object");
    cur.for_each_member([&](const std::string& key) {
        std::size_t k = 0;
        while (k < keys.size() && keys[k] != key) ++k;
        if (k == keys.size()) {
            cur.skip_value();
            return;
        }
        TextField& f = fields[k];
        f.present = true;
        f.count = 0;  // a duplicate key replaces the earlier value, as in Python
        auto next_part = [&]() -> std::string& {
            if (f.count == f.parts.size()) f.parts.emplace_back();
            std::string& s = f.parts[f.count++];
            s.clear();
            return s;
        };
        char c = cur.peek();
        if (c == '"') {
            f.is_list = false;
            cur.parse_string(next_part());
        } else if (c == '[') {
            f.is_list = true;
            cur.expect('[');
            if (cur.consume(']')) return;
            do {
                if (cur.peek() != '"') cur.fail("key '" + key + "' holds a list with a non-string element");
                cur.parse_string(next_part());
            } while (cur.consume(','));
            cur.expect(']');
        } else {
            cur.fail("key '" + key + "' holds neither a string nor a list of strings");
        }
    });
    if (!cur.at_end()) cur.fail("extra data after the JSON object");
}

}  // namespace gpt::data
