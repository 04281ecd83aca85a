#include "config/step_batch_schedule.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/errors.hpp"

namespace gpt {

namespace {

constexpr const char* kFlag = "--step-batch-size-schedule";

// Megatron's _parse_numeric_value: an optional suffix, then int(float(rest) * multiplier).
// The product is a double, as in Python, so "2.4B" is 2400000000 and "0.5" truncates to 0.
std::int64_t parse_number(const std::string& entry, std::string text) {
    double multiplier = 1.0;
    if (!text.empty()) {
        switch (std::toupper(static_cast<unsigned char>(text.back()))) {
            case 'T': multiplier = 1e12; break;
            case 'B': multiplier = 1e9; break;
            case 'M': multiplier = 1e6; break;
            case 'K': multiplier = 1e3; break;
            default: break;
        }
        if (multiplier != 1.0) text.pop_back();
    }
    char* end = nullptr;
    errno = 0;
    const double v = text.empty() ? NAN : std::strtod(text.c_str(), &end);
    GPT_REQUIRE(!text.empty() && end == text.c_str() + text.size() && errno == 0 && std::isfinite(v), UsageError,
                kFlag, ": cannot read the number '", text, "' in the entry \"", entry,
                "\" (expected THRESHOLD:BATCH_SIZE, each a number with an optional K, M, B or T)");
    const double x = v * multiplier;
    GPT_REQUIRE(std::fabs(x) < 9.2e18, UsageError, kFlag, ": the number in \"", entry, "\" is too large");
    return static_cast<std::int64_t>(x);  // truncates toward zero, as Python's int()
}

}  // namespace

std::vector<BatchStep> parse_step_batch_schedule(const std::string& text, int seq_length) {
    GPT_REQUIRE(seq_length > 0, UsageError, kFlag, " needs --seq-length: its thresholds are tokens");
    std::string words = text;
    std::replace(words.begin(), words.end(), ',', ' ');
    std::vector<BatchStep> steps;
    std::size_t pos = 0;
    while (true) {
        pos = words.find_first_not_of(" \t", pos);
        if (pos == std::string::npos) break;
        const std::size_t end = std::min(words.find_first_of(" \t", pos), words.size());
        const std::string entry = words.substr(pos, end - pos);
        pos = end;
        const std::size_t colon = entry.find(':');
        GPT_REQUIRE(colon != std::string::npos, UsageError, kFlag, ": invalid entry \"", entry,
                    "\"; expected THRESHOLD:BATCH_SIZE, e.g. \"0:768 250B:1536\"");
        const std::int64_t tokens = parse_number(entry, entry.substr(0, colon));
        GPT_REQUIRE(tokens >= 0, UsageError, kFlag, ": the threshold in \"", entry, "\" is negative");
        steps.push_back({tokens / seq_length, parse_number(entry, entry.substr(colon + 1))});
    }
    GPT_REQUIRE(!steps.empty(), UsageError, kFlag, " has no entry; expected \"THRESHOLD:BATCH_SIZE ...\"");
    std::stable_sort(steps.begin(), steps.end(),
                     [](const BatchStep& a, const BatchStep& b) { return a.first_sample < b.first_sample; });
    GPT_REQUIRE(steps.front().first_sample == 0, UsageError, kFlag,
                ": the first threshold must be 0 (the batch to start with), got ", steps.front().first_sample,
                " samples (tokens / seq-length ", seq_length, ")");
    for (std::size_t i = 1; i < steps.size(); ++i)
        GPT_REQUIRE(steps[i].first_sample > steps[i - 1].first_sample, UsageError, kFlag,
                    ": the thresholds must be strictly increasing in samples (tokens / seq-length ", seq_length,
                    "), got ", steps[i - 1].first_sample, " before ", steps[i].first_sample);
    for (const BatchStep& s : steps)
        GPT_REQUIRE(s.batch > 0, UsageError, kFlag, ": batch sizes must be positive, got ", s.batch);
    return steps;
}

}  // namespace gpt
