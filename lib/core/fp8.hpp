// 8-bit floating-point storage (OCP FP8 as Hopper's tensor cores read it): E4M3 (4 exponent
// bits, bias 7, 3 mantissa bits, no infinities, one NaN pattern per sign, largest finite 448)
// and E5M2 (5 exponent bits, bias 15, 2 mantissa bits, IEEE-style infinities and NaNs,
// largest finite 57344). Issue 34's FP8 training quantises GEMM inputs to these on the CPU
// backend and the CUDA emulator with exactly the arithmetic of the GPU's conversion
// (cvt.rn.satfinite: round to nearest even; anything beyond the largest finite value,
// infinities included, saturates to it with its sign; NaN becomes 0x7F), so every FP8 path can
// be tested in CI. Host code only: device kernels use the hardware conversion.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/fp8_format.hpp"

namespace gpt {

namespace fp8_detail {

template <int E, int M>
struct Layout {
    static constexpr int kBias = (1 << (E - 1)) - 1;
    static constexpr int kMinExponent = 1 - kBias;  // of the normals
    // The largest finite code without its sign: E4M3 0x7E (S.1111.110), E5M2 0x7B (S.11110.11).
    static constexpr std::uint32_t kMaxCode = E == 4 ? 0x7Eu : 0x7Bu;
};

template <int E, int M>
inline std::uint8_t encode(float x) {
    using L = Layout<E, M>;
    const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
    const std::uint32_t sign = (u >> 24) & 0x80u;
    const std::uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return 0x7F;                    // NaN, whatever its sign (as the GPU)
    if (a == 0x7f800000u) return static_cast<std::uint8_t>(sign | L::kMaxCode);  // saturated
    // |x| = mant x 2^(fexp - 150), mant with its hidden bit.
    int fexp = static_cast<int>(a >> 23);
    std::uint32_t mant = a & 0x7fffffu;
    if (fexp == 0) {
        if (mant == 0) return static_cast<std::uint8_t>(sign);
        fexp = 1;  // an fp32 subnormal: far below FP8's smallest step, it rounds to zero below
    } else {
        mant |= 0x800000u;
    }
    // The step of the FP8 values around |x|: 2^(e - M) for a normal of exponent e, the
    // subnormals' fixed 2^(kMinExponent - M) below that. Drop the bits under it, rounding to
    // nearest even.
    const int e = fexp - 127;
    int step = (e > L::kMinExponent ? e : L::kMinExponent) - M;
    const int shift = step - (fexp - 150);  // >= 23 - M > 0
    if (shift >= 25) return static_cast<std::uint8_t>(sign);  // below half the smallest step
    std::uint32_t q = mant >> shift;
    const std::uint32_t rest = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1u))) ++q;
    if (q == (1u << (M + 1))) {  // rounded up into the next binade
        q >>= 1;
        ++step;
    }
    std::uint32_t code;
    if (q >= (1u << M)) {
        const int field = step + M + L::kBias;
        code = field > 31 ? 0xFFu : (static_cast<std::uint32_t>(field) << M) | (q - (1u << M));
    } else {
        code = q;  // a subnormal (or zero)
    }
    return static_cast<std::uint8_t>(sign | (code > L::kMaxCode ? L::kMaxCode : code));
}

template <int E, int M>
inline float decode(std::uint8_t v) {
    using L = Layout<E, M>;
    const bool negative = (v & 0x80u) != 0;
    const int field = (v >> M) & ((1 << E) - 1);
    const int mant = v & ((1 << M) - 1);
    float r;
    if (E == 4 && field == 15 && mant == 7) {
        r = std::numeric_limits<float>::quiet_NaN();
    } else if (E == 5 && field == 31) {
        r = mant == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    } else if (field == 0) {
        r = std::ldexp(static_cast<float>(mant), L::kMinExponent - M);
    } else {
        r = std::ldexp(static_cast<float>((1 << M) | mant), field - L::kBias - M);
    }
    return negative ? -r : r;
}

}  // namespace fp8_detail

// x rounded to the nearest FP8 value of `format` (ties to even), saturated to the largest
// finite value; NaN gives 0x7F.
inline std::uint8_t float_to_fp8(float x, Fp8Format format) {
    return format == Fp8Format::E4M3 ? fp8_detail::encode<4, 3>(x) : fp8_detail::encode<5, 2>(x);
}

// The exact value of an FP8 code (every one is an fp32 value).
inline float fp8_to_float(std::uint8_t v, Fp8Format format) {
    return format == Fp8Format::E4M3 ? fp8_detail::decode<4, 3>(v) : fp8_detail::decode<5, 2>(v);
}

}  // namespace gpt
