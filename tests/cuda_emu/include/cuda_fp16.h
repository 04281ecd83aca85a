// Emulated cuda_fp16.h (tests/cuda_emu): IEEE binary16 storage with the project's own
// round-to-nearest-even conversions (lib/core/half.hpp), which match the hardware's.
#pragma once

#include <cstdint>

#include "core/half.hpp"

struct __half {
    std::uint16_t x;
};
inline float __half2float(__half h) { return gpt::half_bits_to_float(h.x); }
inline __half __float2half_rn(float f) { return __half{gpt::float_to_half_bits(f)}; }
inline __half __float2half(float f) { return __float2half_rn(f); }
