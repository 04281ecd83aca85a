#include "config/data_blend.hpp"

#include <cmath>
#include <cstdlib>

#include "core/errors.hpp"

namespace gpt {

bool is_number(const std::string& s) {
    char* end = nullptr;
    std::strtod(s.c_str(), &end);
    return !s.empty() && end && *end == '\0';
}

std::array<double, 3> parse_split(const std::string& split) {
    std::array<double, 3> f{0, 0, 0};
    std::size_t count = 0, i = 0;
    while (i < split.size()) {
        const char c = split[i];
        if (c == ',' || c == '/' || c == ' ' || c == '\t') {
            ++i;
            continue;
        }
        std::size_t j = i;
        while (j < split.size() && split[j] != ',' && split[j] != '/' && split[j] != ' ' && split[j] != '\t') ++j;
        const std::string part = split.substr(i, j - i);
        if (count == 3) GPT_THROW(UsageError, "--split '", split, "' has more than 3 parts (train, valid, test)");
        char* end = nullptr;
        const double v = std::strtod(part.c_str(), &end);
        GPT_REQUIRE(end && *end == '\0' && std::isfinite(v) && v >= 0, UsageError, "--split '", split, "': '", part,
                    "' is not a non-negative number (expected numbers like \"969,30,1\")");
        f[count++] = v;
        i = j;
    }
    const double sum = f[0] + f[1] + f[2];
    GPT_REQUIRE(sum > 0 && std::isfinite(sum), UsageError, "--split '", split, "' must have a positive part");
    for (double& x : f) x /= sum;
    return f;
}

Blend parse_blend(const std::vector<std::string>& words, const std::string& flag) {
    Blend b;
    for (const auto& w : words) GPT_REQUIRE(!w.empty(), UsageError, "--", flag, " has an empty prefix");
    if (words.empty()) return b;
    if (!is_number(words[0])) {
        for (const auto& w : words) {
            GPT_REQUIRE(!is_number(w), UsageError, "--", flag, ": weight '", w,
                        "' among prefixes without weights (give a weight before every prefix, or none)");
            b.entries.push_back({1.0, w});
        }
        return b;
    }
    b.weighted = true;
    GPT_REQUIRE(words.size() % 2 == 0, UsageError, "--", flag,
                " with several datasets must alternate weight and prefix, got ", words.size(), " words");
    double sum = 0;
    for (std::size_t i = 0; i < words.size(); i += 2) {
        char* end = nullptr;
        const double w = std::strtod(words[i].c_str(), &end);
        GPT_REQUIRE(end && *end == '\0' && w >= 0 && std::isfinite(w), UsageError, "--", flag, " weight '",
                    words[i], "' before '", words[i + 1], "' is not a non-negative number");
        GPT_REQUIRE(!is_number(words[i + 1]), UsageError, "--", flag, ": weight '", words[i + 1],
                    "' where a dataset prefix should follow weight '", words[i], "'");
        sum += w;
        b.entries.push_back({w, words[i + 1]});
    }
    // Blending normalises by the sum: it must be a positive finite number.
    GPT_REQUIRE(std::isfinite(sum) && sum > 0, UsageError, "--", flag, " weights sum to ", sum,
                ": they must add up to a positive finite number");
    return b;
}

}  // namespace gpt
