// Emulated cuda_bf16.h (tests/cuda_emu): bfloat16 storage, round-to-nearest-even
// conversions from lib/core/half.hpp.
#pragma once

#include <cstdint>

#include "core/half.hpp"

struct __nv_bfloat16 {
    std::uint16_t x;
};
inline float __bfloat162float(__nv_bfloat16 h) { return gpt::bf16_bits_to_float(h.x); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16{gpt::float_to_bf16_bits(f)}; }
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
