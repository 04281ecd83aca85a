// One-line UsageErrors for a flag's value out of range, shared by the validation files.
#pragma once

#include <cmath>

#include "core/errors.hpp"

namespace gpt {

inline void require_positive(long long v, const char* flag) {
    GPT_REQUIRE(v > 0, UsageError, "--", flag, " must be positive, got ", v);
}

inline void require_non_negative(long long v, const char* flag) {
    GPT_REQUIRE(v >= 0, UsageError, "--", flag, " must not be negative, got ", v);
}

inline void require_finite(double v, const char* flag) {
    GPT_REQUIRE(std::isfinite(v), UsageError, "--", flag, " must be a finite number, got ", v);
}

inline void require_prob(double p, const char* flag) {
    GPT_REQUIRE(p >= 0.0 && p < 1.0, UsageError, "--", flag, " must be in [0, 1), got ", p);
}

}  // namespace gpt
