// FP8 conversions (core/fp8.hpp): every code decodes to the value its bits define, every
// finite code survives encode(decode(.)), midpoints round to the even neighbour, values past
// the largest finite one saturate, and (where the CUDA toolkit is installed) every result
// equals NVIDIA's own conversion, __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...), over a sweep
// of all fp32 exponents and the neighbourhood of every FP8 midpoint.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/fp8.hpp"

#if GPT_TEST_FP8_CUDA_REFERENCE
#include <cuda_fp8.h>
#endif

namespace gpt {
namespace {

struct Spec {
    Fp8Format format;
    int exponent_bits, mantissa_bits, bias;
    float max;
};
const Spec kSpecs[] = {{Fp8Format::E4M3, 4, 3, 7, 448.0f}, {Fp8Format::E5M2, 5, 2, 15, 57344.0f}};

// The value of a code from the OCP definition, written independently of fp8.hpp's decoder.
double defined_value(const Spec& s, unsigned code) {
    const unsigned field = (code >> s.mantissa_bits) & ((1u << s.exponent_bits) - 1);
    const unsigned mant = code & ((1u << s.mantissa_bits) - 1);
    const double sign = (code & 0x80u) ? -1.0 : 1.0;
    const unsigned top = (1u << s.exponent_bits) - 1;
    if (s.format == Fp8Format::E4M3 && field == top && mant == 7) return NAN;
    if (s.format == Fp8Format::E5M2 && field == top) return mant == 0 ? sign * INFINITY : NAN;
    const double frac = static_cast<double>(mant) / (1u << s.mantissa_bits);
    if (field == 0) return sign * frac * std::pow(2.0, 1 - s.bias);
    return sign * (1.0 + frac) * std::pow(2.0, static_cast<int>(field) - s.bias);
}

bool finite_code(const Spec& s, unsigned code) { return std::isfinite(defined_value(s, code)); }

TEST(Fp8, EveryCodeDecodesToItsDefinedValue) {
    for (const Spec& s : kSpecs)
        for (unsigned c = 0; c < 256; ++c) {
            const double want = defined_value(s, c);
            const float got = fp8_to_float(static_cast<std::uint8_t>(c), s.format);
            if (std::isnan(want))
                EXPECT_TRUE(std::isnan(got)) << "code " << c;
            else
                EXPECT_EQ(static_cast<double>(got), want) << "code " << c;
        }
    EXPECT_EQ(fp8_to_float(0x7E, Fp8Format::E4M3), 448.0f);
    EXPECT_EQ(fp8_to_float(0x7B, Fp8Format::E5M2), 57344.0f);
    EXPECT_EQ(fp8_to_float(0x01, Fp8Format::E4M3), std::ldexp(1.0f, -9));
    EXPECT_EQ(fp8_to_float(0x01, Fp8Format::E5M2), std::ldexp(1.0f, -16));
}

TEST(Fp8, FiniteCodesRoundTripAndMidpointsRoundToEven) {
    for (const Spec& s : kSpecs) {
        // The finite non-negative codes in increasing order of value, then each midpoint.
        std::vector<unsigned> codes;
        for (unsigned c = 0; c < 0x80; ++c)
            if (finite_code(s, c)) codes.push_back(c);
        for (unsigned c = 0; c < 256; ++c) {
            if (!finite_code(s, c) || c == 0x80) continue;  // -0 is checked below
            EXPECT_EQ(float_to_fp8(fp8_to_float(static_cast<std::uint8_t>(c), s.format), s.format), c) << "code " << c;
        }
        EXPECT_EQ(float_to_fp8(-0.0f, s.format), 0x80);
        for (std::size_t i = 0; i + 1 < codes.size(); ++i) {
            const double lo = defined_value(s, codes[i]), hi = defined_value(s, codes[i + 1]);
            const auto mid = static_cast<float>((lo + hi) / 2);  // exact in fp32
            ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
            const unsigned even = (codes[i] & 1u) == 0 ? codes[i] : codes[i + 1];
            EXPECT_EQ(float_to_fp8(mid, s.format), even) << "between codes " << codes[i] << " and " << codes[i + 1];
            EXPECT_EQ(float_to_fp8(-mid, s.format), even | 0x80u);
            EXPECT_EQ(float_to_fp8(std::nextafter(mid, 0.0f), s.format), codes[i]);
            EXPECT_EQ(float_to_fp8(std::nextafter(mid, INFINITY), s.format), codes[i + 1]);
        }
    }
}

TEST(Fp8, BeyondTheLargestValueSaturatesAndNanStaysNan) {
    for (const Spec& s : kSpecs) {
        const std::uint8_t max = float_to_fp8(s.max, s.format);
        EXPECT_EQ(fp8_to_float(max, s.format), s.max);
        for (float x : {std::nextafter(s.max, INFINITY), s.max * 1.5f, 1e30f, INFINITY}) {
            EXPECT_EQ(float_to_fp8(x, s.format), max) << x;
            EXPECT_EQ(float_to_fp8(-x, s.format), max | 0x80u) << -x;
        }
        EXPECT_EQ(float_to_fp8(NAN, s.format), 0x7F);
        EXPECT_EQ(float_to_fp8(-NAN, s.format), 0x7F);
        EXPECT_EQ(float_to_fp8(std::ldexp(1.0f, -140), s.format), 0x00);  // an fp32 subnormal
        EXPECT_EQ(fp8_max(s.format), s.max);
    }
}

#if GPT_TEST_FP8_CUDA_REFERENCE
TEST(Fp8, EqualsNvidiasConversion) {
    auto nv = [](float x, Fp8Format f) {
        return static_cast<unsigned>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, f == Fp8Format::E4M3 ? __NV_E4M3 : __NV_E5M2));
    };
    std::vector<float> xs;
    // Every fp32 exponent with 256 mantissas each (both signs below), infinities and NaNs.
    for (std::uint32_t bits = 0; bits < 0x7f800000u; bits += 1u << 15) xs.push_back(std::bit_cast<float>(bits + 12345u));
    for (std::uint32_t bits = 0; bits <= 0x7f800000u; bits += 1u << 15) xs.push_back(std::bit_cast<float>(bits));
    xs.push_back(std::bit_cast<float>(0x7fc00000u));
    xs.push_back(std::bit_cast<float>(0x7f800001u));
    // A few fp32 steps around every value and midpoint of both formats.
    for (const Spec& s : kSpecs)
        for (unsigned c = 0; c < 0x80; ++c) {
            if (!finite_code(s, c)) continue;
            const double v = defined_value(s, c), next = c + 1 < 0x80 ? defined_value(s, c + 1) : v * 2;
            for (double point : {v, (v + (std::isfinite(next) ? next : v * 2)) / 2}) {
                float x = static_cast<float>(point);
                for (int k = 0; k < 3; ++k) x = std::nextafter(x, 0.0f);
                for (int k = 0; k < 7; ++k, x = std::nextafter(x, INFINITY)) xs.push_back(x);
            }
        }
    std::size_t checked = 0;
    for (float x : xs)
        for (float y : {x, -x})
            for (const Spec& s : kSpecs) {
                ASSERT_EQ(static_cast<unsigned>(float_to_fp8(y, s.format)), nv(y, s.format))
                    << std::hexfloat << y << (s.format == Fp8Format::E4M3 ? " E4M3" : " E5M2");
                ++checked;
            }
    EXPECT_GT(checked, 100000u);
}
#endif

}  // namespace
}  // namespace gpt
