#include "config/flag_binding.hpp"

#include <charconv>
#include <sstream>

#include "core/errors.hpp"

namespace gpt {

std::string flag_text(bool v) { return v ? "True" : "False"; }
std::string flag_text(int v) { return std::to_string(v); }
std::string flag_text(std::int64_t v) { return std::to_string(v); }
std::string flag_text(std::uint64_t v) { return std::to_string(v); }
std::string flag_text(double v) {
    std::ostringstream os;
    os << v;
    return os.str();
}
std::string flag_text(const std::string& v) { return v.empty() ? "None" : v; }
std::string flag_text(const std::vector<int>& v) {
    if (v.empty()) return "None";
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
}
std::vector<int> int_list(const std::vector<std::string>& words, const char* flag) {
    std::vector<int> out;
    for (const std::string& w : words) {
        std::istringstream in(w);
        std::string word;
        while (in >> word) {
            int v = 0;
            const auto r = std::from_chars(word.data(), word.data() + word.size(), v);
            GPT_REQUIRE(r.ec == std::errc() && r.ptr == word.data() + word.size(), UsageError, "--", flag, ": '", word,
                        "' is not an integer");
            out.push_back(v);
        }
    }
    return out;
}

std::string flag_text(const std::vector<std::string>& v) {
    if (v.empty()) return "None";
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", '" : "'") + v[i] + "'";
    return s + "]";
}

}  // namespace gpt
