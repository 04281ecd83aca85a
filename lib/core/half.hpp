// 16-bit floating-point storage types (IEEE binary16 and bfloat16) and their conversions.
//
// Storage only: arithmetic always happens in fp32. Scalar conversions round to nearest even,
// keep signed zeros, subnormals, infinities and NaN (NaN stays NaN, made quiet). The bulk
// converters use F16C for fp16 where the compiler targets it; bf16 uses the integer
// rounding below in a loop the compiler vectorises (the AVX-512 BF16 instruction flushes
// fp32 subnormal inputs to zero, which would make the vector and scalar paths disagree).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#if (defined(__F16C__) || defined(__AVX512F__)) && !defined(__CUDA_ARCH__)
#include <immintrin.h>
#define GPT_HALF_HAVE_F16C 1
#else
#define GPT_HALF_HAVE_F16C 0
#endif

// Vectorisation hint for the bulk loops, only where OpenMP is on (no unknown-pragma noise).
#if defined(_OPENMP)
#define GPT_HALF_SIMD _Pragma("omp simd")
#else
#define GPT_HALF_SIMD
#endif

namespace gpt {

// Distinct types so overloads and templates can tell fp16 and bf16 bit patterns apart.
struct Half {
    std::uint16_t bits;
};
struct BFloat16 {
    std::uint16_t bits;
};
static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2);

// ---- scalar conversions ---------------------------------------------------------------

inline float half_bits_to_float(std::uint16_t h) {
    std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    std::uint32_t exp = (h >> 10) & 0x1fu;
    std::uint32_t man = h & 0x3ffu;
    if (exp == 0) {
        // Zero or subnormal: value = man * 2^-24, exact in fp32.
        float v = static_cast<float>(man) * 5.9604644775390625e-8f;
        return std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) | sign);
    }
    if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
    return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

inline std::uint16_t float_to_half_bits(float f) {
    std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    std::uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) {
        // Inf stays Inf; NaN keeps its top payload bits and is made quiet.
        if (x == 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
        return static_cast<std::uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
    }
    // 65520 is halfway between the largest half (65504, odd mantissa) and 2^16: ties-to-even
    // rounds it up, so everything from there on overflows to Inf.
    if (x >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
    if (x < 0x38800000u) {
        // Below the smallest normal half (2^-14): result is subnormal (units of 2^-24).
        if (x < 0x33000000u) return static_cast<std::uint16_t>(sign);  // < 2^-25: rounds to 0
        std::uint32_t e = x >> 23;
        std::uint32_t m = (x & 0x7fffffu) | 0x800000u;
        std::uint32_t shift = 126u - e;  // 14..24
        std::uint32_t r = m >> shift;
        std::uint32_t rem = m & ((1u << shift) - 1u);
        std::uint32_t halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
        return static_cast<std::uint16_t>(sign | r);
    }
    std::uint32_t h = (x >> 13) - (112u << 10);
    std::uint32_t rem = x & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry may bump the exponent
    return static_cast<std::uint16_t>(sign | h);
}

inline float bf16_bits_to_float(std::uint16_t b) {
    return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

inline std::uint16_t float_to_bf16_bits(float f) {
    std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    // Branch-free so bulk loops vectorise: NaN -> quiet NaN with the same sign and top bits;
    // otherwise add 0x7fff plus the lowest kept bit (ties to even); Inf and overflow to Inf
    // come out right from the same addition.
    std::uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    std::uint32_t quiet = (x >> 16) | 0x40u;
    bool is_nan = (x & 0x7fffffffu) > 0x7f800000u;
    return static_cast<std::uint16_t>(is_nan ? quiet : rounded);
}

inline float to_float(Half h) { return half_bits_to_float(h.bits); }
inline float to_float(BFloat16 b) { return bf16_bits_to_float(b.bits); }
inline float to_float(float f) { return f; }

// from_float<T>(f): the storage value of type T nearest to f.
template <typename T>
T from_float(float f);
template <>
inline float from_float<float>(float f) { return f; }
template <>
inline Half from_float<Half>(float f) { return Half{float_to_half_bits(f)}; }
template <>
inline BFloat16 from_float<BFloat16>(float f) { return BFloat16{float_to_bf16_bits(f)}; }

// ---- bulk conversions (n elements, no alignment required) ------------------------------

inline void convert(const Half* src, float* dst, std::size_t n) {
    std::size_t i = 0;
#if GPT_HALF_HAVE_F16C
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
        // maskz forms: GCC 12 warns about the undefined pass-through of the plain ones.
        _mm512_storeu_ps(dst + i, _mm512_maskz_cvtph_ps(0xffff, h));
    }
#endif
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
#endif
    for (; i < n; ++i) dst[i] = half_bits_to_float(src[i].bits);
}

inline void convert(const float* src, Half* dst, std::size_t n) {
    std::size_t i = 0;
#if GPT_HALF_HAVE_F16C
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm512_maskz_cvtps_ph(0xffff, _mm512_loadu_ps(src + i),
                                           _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), h);
    }
#endif
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
    }
#endif
    for (; i < n; ++i) dst[i].bits = float_to_half_bits(src[i]);
}

inline void convert(const BFloat16* src, float* dst, std::size_t n) {
GPT_HALF_SIMD
    for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_float(src[i].bits);
}

inline void convert(const float* src, BFloat16* dst, std::size_t n) {
GPT_HALF_SIMD
    for (std::size_t i = 0; i < n; ++i) dst[i].bits = float_to_bf16_bits(src[i]);
}

inline void convert(const float* src, float* dst, std::size_t n) {
    if (src == dst) return;
    for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
}

}  // namespace gpt
