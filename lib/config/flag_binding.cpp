#include "config/flag_binding.hpp"

#include <sstream>

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
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
}
std::string flag_text(const std::vector<std::string>& v) {
    if (v.empty()) return "None";
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", '" : "'") + v[i] + "'";
    return s + "]";
}

}  // namespace gpt
