#include "config/option_value.hpp"

#include <charconv>
#include <sstream>

namespace gpt {

namespace {

// As the arguments table prints it (6 significant digits: 500000, 1e-05) when that reads
// back as v, else the shortest text that does.
std::string exact(double v) {
    std::ostringstream os;
    os << v;
    double back = 0.0;
    const std::string t = os.str();
    if (std::from_chars(t.data(), t.data() + t.size(), back).ptr == t.data() + t.size() && back == v) return t;
    char buf[64];
    return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

struct Text {
    std::string operator()(bool v) const { return v ? "True" : "False"; }
    std::string operator()(std::int64_t v) const { return std::to_string(v); }
    std::string operator()(std::uint64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return exact(v); }
    std::string operator()(const std::string& v) const { return v.empty() ? "None" : v; }
    std::string operator()(const std::vector<std::int64_t>& v) const {
        std::string s = "[";
        for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
        return s + "]";
    }
    std::string operator()(const std::vector<std::string>& v) const {
        if (v.empty()) return "None";
        std::string s = "[";
        for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", '" : "'") + v[i] + "'";
        return s + "]";
    }
};

}  // namespace

std::string option_value_text(const OptionValue& v) { return std::visit(Text{}, v); }

bool option_value_unset(const OptionValue& v) {
    if (const auto* s = std::get_if<std::string>(&v)) return s->empty();
    if (const auto* l = std::get_if<std::vector<std::string>>(&v)) return l->empty();
    return false;
}

}  // namespace gpt
