// What every backend implementing the modern decoder ops (RMSNorm, SwiGLU, grouped QKV with
// rope) shares: the argument checks, so a bad call fails with the same line on --device cpu
// and --device cuda, and the rotary frequencies, so both rotate by the same fp32 angles.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/backend.hpp"
#include "core/errors.hpp"

namespace gpt {

inline void check_decoder_rows(std::int64_t rows, std::int64_t cols, const char* op) {
    GPT_REQUIRE(rows >= 0 && cols > 0, UsageError, op, ": bad shape ", rows, "x", cols);
}

inline void check_qkv_expand(const QkvExpandArgs& a, const char* op) {
    GPT_REQUIRE(a.s > 0 && a.b > 0 && a.groups > 0 && a.heads_per_group > 0 && a.hn > 0 &&
                    a.rotary_dim >= 0 && a.rotary_dim <= a.hn && a.rotary_dim % 2 == 0,
                UsageError, op, ": bad shape s=", a.s, " b=", a.b, " groups=", a.groups,
                " heads/group=", a.heads_per_group, " hn=", a.hn, " rotary_dim=", a.rotary_dim);
}

// Pair i of a rotary_dim-wide rotation turns by pos * rope_inv_freq(...) (Megatron's
// 1 / base^(2i / dim), in fp32).
inline float rope_inv_freq(float base, std::int64_t dim, std::int64_t i) {
    return 1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(dim));
}

}  // namespace gpt
