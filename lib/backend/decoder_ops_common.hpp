// What every backend implementing the grouped QKV with rope shares: the rotary frequencies,
// so --device cpu and --device cuda rotate by the same fp32 angles. (The argument checks of
// these ops are in checked_ops.cpp, above every device.)
#pragma once

#include <cmath>
#include <cstdint>

namespace gpt {

// Pair i of a rotary_dim-wide rotation turns by pos * rope_inv_freq(...) (Megatron's
// 1 / base^(2i / dim), in fp32).
inline float rope_inv_freq(float base, std::int64_t dim, std::int64_t i) {
    return 1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(dim));
}

}  // namespace gpt
