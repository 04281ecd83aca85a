// fp16/bf16 conversions against brute-force references, and Philox against the published
// known-answer vectors (Random123, Salmon et al. SC'11).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/half.hpp"
#include "core/philox.hpp"

namespace gpt {
namespace {

bool is_nan_half(std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }

// Nearest half by search over the ordered positive encodings; ties go to even mantissa;
// values at or past 65520 overflow to Inf.
std::uint16_t reference_half(float f) {
    std::uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
    double a = std::abs(static_cast<double>(f));
    if (a >= 65520.0) return sign | 0x7c00u;
    std::uint16_t lo = 0, hi = 0x7bff;
    while (lo < hi) {  // largest encoding with value <= a
        std::uint16_t mid = static_cast<std::uint16_t>((lo + hi + 1) / 2);
        if (half_bits_to_float(mid) <= a) lo = mid; else hi = mid - 1;
    }
    double below = half_bits_to_float(lo);
    if (below == a) return sign | lo;
    double above = half_bits_to_float(static_cast<std::uint16_t>(lo + 1));
    double db = a - below, da = above - a;
    std::uint16_t pick = db < da ? lo : da < db ? lo + 1 : ((lo & 1u) ? lo + 1 : lo);
    return sign | pick;
}

std::uint16_t reference_bf16(float f) {
    std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    std::uint32_t lo = x & 0xffff0000u;
    double v = f, below = std::bit_cast<float>(lo);
    if (below == v) return static_cast<std::uint16_t>(lo >> 16);
    double above = std::bit_cast<float>(lo + 0x10000u);  // Inf past the largest finite
    double db = std::abs(v - below), da = std::abs(above - v);
    if (std::isinf(above)) da = std::ldexp(1.0, 128) - std::abs(v);  // the rounding boundary
    std::uint32_t pick = db < da ? lo : da < db ? lo + 0x10000u
                                               : (((lo >> 16) & 1u) ? lo + 0x10000u : lo);
    return static_cast<std::uint16_t>(pick >> 16);
}

std::vector<float> interesting_floats() {
    std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.99f, 65520.0f, 65536.0f,
                            1e-8f, 2.9802322e-8f, 5.9604645e-8f, 6.1035156e-5f, 6.1e-5f,
                            3.0e38f, 3.4028235e38f, 1e-40f, -1e-45f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
    // Exact halfway cases between neighbouring halves and neighbouring bf16 values.
    for (std::uint16_t h : {0x3c00, 0x3c01, 0x0001, 0x0002, 0x03ff, 0x7bfe, 0x4000}) {
        float a = half_bits_to_float(h), b = half_bits_to_float(static_cast<std::uint16_t>(h + 1));
        v.push_back((a + b) / 2);
        v.push_back(std::nextafter((a + b) / 2, 0.0f));
        v.push_back(std::nextafter((a + b) / 2, 1e9f));
    }
    for (std::uint32_t b : {0x3f800000u, 0x3f810000u, 0x7f7f0000u, 0x00010000u})
        v.push_back(std::bit_cast<float>(b | 0x8000u));
    std::mt19937 gen(7);
    std::uniform_int_distribution<std::uint32_t> bits;
    for (int i = 0; i < 200000; ++i) {
        float f = std::bit_cast<float>(bits(gen));
        if (!std::isnan(f)) v.push_back(f);
    }
    std::uniform_real_distribution<float> small(-70000.0f, 70000.0f);
    for (int i = 0; i < 100000; ++i) v.push_back(small(gen));
    return v;
}

TEST(Half, EveryHalfRoundTripsExactly) {
    for (std::uint32_t h = 0; h < 65536; ++h) {
        float f = half_bits_to_float(static_cast<std::uint16_t>(h));
        std::uint16_t back = float_to_half_bits(f);
        if (is_nan_half(static_cast<std::uint16_t>(h))) {
            ASSERT_TRUE(std::isnan(f)) << h;
            ASSERT_TRUE(is_nan_half(back)) << h;
            ASSERT_EQ(back, h | 0x200u) << "NaN payload kept, made quiet";
        } else {
            ASSERT_EQ(back, h) << "half " << h << " -> " << f;
        }
    }
}

TEST(Half, FloatToHalfRoundsToNearestEven) {
    for (float f : interesting_floats())
        ASSERT_EQ(float_to_half_bits(f), reference_half(f)) << "f = " << f;
}

TEST(Half, FloatToBf16RoundsToNearestEven) {
    for (float f : interesting_floats())
        ASSERT_EQ(float_to_bf16_bits(f), reference_bf16(f)) << "f = " << f;
    for (std::uint32_t b = 0; b < 65536; ++b) {
        float f = bf16_bits_to_float(static_cast<std::uint16_t>(b));
        if (std::isnan(f)) {
            ASSERT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(f))));
        } else {
            ASSERT_EQ(float_to_bf16_bits(f), b);
        }
    }
    float qnan = std::numeric_limits<float>::quiet_NaN();
    float snan = std::bit_cast<float>(0xff800001u);  // signalling, payload only in low bits
    EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(qnan))));
    EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(snan))));
    EXPECT_TRUE(float_to_bf16_bits(snan) & 0x8000u) << "sign kept";
}

TEST(Half, BulkConversionsMatchScalar) {
    std::vector<float> src = interesting_floats();
    src.push_back(std::numeric_limits<float>::quiet_NaN());
    src.push_back(std::bit_cast<float>(0xffc12345u));
    src.resize(src.size() - src.size() % 37 + 29);  // not a multiple of any vector width
    std::vector<Half> h(src.size());
    std::vector<BFloat16> b(src.size());
    convert(src.data(), h.data(), src.size());
    convert(src.data(), b.data(), src.size());
    std::vector<float> hf(src.size()), bf(src.size());
    convert(h.data(), hf.data(), src.size());
    convert(b.data(), bf.data(), src.size());
    for (std::size_t i = 0; i < src.size(); ++i) {
        if (std::isnan(src[i])) {
            ASSERT_TRUE(is_nan_half(h[i].bits)) << i;
            ASSERT_TRUE(std::isnan(hf[i]) && std::isnan(bf[i])) << i;
            continue;
        }
        ASSERT_EQ(h[i].bits, float_to_half_bits(src[i])) << "f = " << src[i];
        ASSERT_EQ(b[i].bits, float_to_bf16_bits(src[i])) << "f = " << src[i];
        ASSERT_EQ(std::bit_cast<std::uint32_t>(hf[i]),
                  std::bit_cast<std::uint32_t>(half_bits_to_float(h[i].bits)));
        ASSERT_EQ(std::bit_cast<std::uint32_t>(bf[i]),
                  std::bit_cast<std::uint32_t>(bf16_bits_to_float(b[i].bits)));
    }
}

TEST(Philox, MatchesRandom123KnownAnswers) {
    Philox4x32 a = philox4x32_10(0, 0, 0, 0, 0);
    EXPECT_EQ(a.v[0], 0x6627e8d5u);
    EXPECT_EQ(a.v[1], 0xe169c58du);
    EXPECT_EQ(a.v[2], 0xbc57ac4cu);
    EXPECT_EQ(a.v[3], 0x9b00dbd8u);
    Philox4x32 b = philox4x32_10(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu,
                                 0xffffffffffffffffull);
    EXPECT_EQ(b.v[0], 0x408f276du);
    EXPECT_EQ(b.v[1], 0x41c83b0eu);
    EXPECT_EQ(b.v[2], 0xa20bc7c6u);
    EXPECT_EQ(b.v[3], 0x6d5451fdu);
    Philox4x32 c = philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u,
                                 (0x299f31d0ull << 32) | 0xa4093822ull);
    EXPECT_EQ(c.v[0], 0xd16cfe09u);
    EXPECT_EQ(c.v[1], 0x94fdccebu);
    EXPECT_EQ(c.v[2], 0x5001e420u);
    EXPECT_EQ(c.v[3], 0x24126ea1u);
}

TEST(Philox, ElementBitsArePureFunctionOfIndex) {
    // philox_bits(seed, i) is lane i%4 of block i/4: consecutive elements share a block.
    Philox4x32 blk = philox4x32_10(5, 0, 0, 0, 42);
    for (int q = 0; q < 4; ++q) EXPECT_EQ(philox_bits(42, 20 + q), blk.v[q]);
    EXPECT_NE(philox_bits(42, 20), philox_bits(43, 20));
    std::uint64_t big = (std::uint64_t{1} << 34) + 8;  // counter high word in use
    Philox4x32 hb = philox4x32_10(2, 1, 0, 0, 42);
    EXPECT_EQ(philox_bits(42, big), hb.v[0]);
    EXPECT_EQ(dropout_threshold(0.0f), 0u);
    EXPECT_EQ(dropout_threshold(0.5f), 0x80000000u);
}

}  // namespace
}  // namespace gpt
