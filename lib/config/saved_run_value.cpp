#include "config/saved_run_value.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>

namespace gpt::saved_run_value {

namespace {

constexpr const char* kTypes[] = {"bool", "int", "uint", "double", "str", "ints", "strs"};
static_assert(std::size(kTypes) == std::variant_size_v<OptionValue>, "a type name per alternative");

// Numbers by to_chars/from_chars: locale-free, and a double's shortest form reads back as
// the same bits.
template <typename T>
std::string number(T v) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
}

std::string quoted(const std::string& s) {
    static const char* hex = "0123456789abcdef";
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20 || c >= 0x7f) {  // control bytes and UTF-8: the attribute stays ASCII
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

template <typename T>
std::string list(const std::vector<T>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + encode(OptionValue(v[i]));
    return s + "]";
}

struct Encode {
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(std::int64_t v) const { return number(v); }
    std::string operator()(std::uint64_t v) const { return number(v); }
    std::string operator()(double v) const { return number(v); }
    std::string operator()(const std::string& v) const { return quoted(v); }
    std::string operator()(const std::vector<std::int64_t>& v) const { return list(v); }
    std::string operator()(const std::vector<std::string>& v) const { return list(v); }
};

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument(what); }

// A left-to-right reader of one value's text.
class Cursor {
public:
    explicit Cursor(std::string_view t) : t_(t) {}
    bool done() const { return i_ == t_.size(); }
    bool take(std::string_view s) {
        if (t_.substr(i_, s.size()) != s) return false;
        i_ += s.size();
        return true;
    }

    template <typename T>
    T number(const char* what) {
        T v{};
        const auto r = std::from_chars(t_.data() + i_, t_.data() + t_.size(), v);
        if (r.ec != std::errc()) bad(std::string("not ") + what);
        i_ = static_cast<std::size_t>(r.ptr - t_.data());
        return v;
    }

    std::string string() {
        if (!take("\"")) bad("a string must start with \"");
        std::string out;
        while (i_ < t_.size() && t_[i_] != '"') {
            const char c = t_[i_++];
            if (c != '\\') {
                out += c;
                continue;
            }
            if (take("\"") || take("\\")) {
                out += t_[i_ - 1];
            } else if (take("x")) {
                unsigned byte = 0;
                const char* end = t_.data() + std::min(i_ + 2, t_.size());
                if (std::from_chars(t_.data() + i_, end, byte, 16).ptr != t_.data() + i_ + 2) bad("a bad \\x escape");
                out += static_cast<char>(byte);
                i_ += 2;
            } else {
                bad("an unknown escape");
            }
        }
        if (!take("\"")) bad("an unterminated string");
        return out;
    }

    template <typename T, typename Item>
    std::vector<T> items(Item item) {
        std::vector<T> out;
        if (!take("[")) bad("a list must start with [");
        if (take("]")) return out;
        do out.push_back(item()); while (take(", "));
        if (!take("]")) bad("a list must end with ]");
        return out;
    }

private:
    std::string_view t_;
    std::size_t i_ = 0;
};

}  // namespace

const char* type_name(const OptionValue& v) { return kTypes[v.index()]; }

std::string encode(const OptionValue& v) { return std::visit(Encode{}, v); }

OptionValue decode(std::string_view type, std::string_view text) {
    Cursor c(text);
    OptionValue v;
    if (type == "bool") {
        if (c.take("true")) v = true;
        else if (c.take("false")) v = false;
        else bad("not true or false");
    } else if (type == "int") {
        v = c.number<std::int64_t>("a 64-bit integer");
    } else if (type == "uint") {
        v = c.number<std::uint64_t>("an unsigned 64-bit integer");
    } else if (type == "double") {
        v = c.number<double>("a number");
    } else if (type == "str") {
        v = c.string();
    } else if (type == "ints") {
        v = c.items<std::int64_t>([&] { return c.number<std::int64_t>("a 64-bit integer"); });
    } else if (type == "strs") {
        v = c.items<std::string>([&] { return c.string(); });
    } else {
        bad("unknown type '" + std::string(type) + "'");
    }
    if (!c.done()) bad("unexpected text after the value");
    return v;
}

}  // namespace gpt::saved_run_value
