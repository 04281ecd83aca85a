// Branch-free fp32 math for loops the compiler vectorises: exp, the normal CDF, GELU,
// squared ReLU.
//
// std::exp/std::erf do not vectorise without -ffast-math, and the vocab-sized softmax and
// the MLP GELU call them tens of millions of times per step, so we evaluate them here with
// selects instead of branches. Accuracy: exp within ~2 ulp; the normal CDF within 1.2e-7
// relative everywhere (also deep in the tails, where 1 + erf(x) would cancel).
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

namespace gpt::cpu {

inline float fast_exp(float x) {
    // Clamp (NaN passes through: comparisons with NaN are false); below -104 the result
    // underflows to 0 and above 88.8 it overflows to Inf through the scaling below.
    float xc = x < -104.0f ? -104.0f : x;
    xc = xc > 88.8f ? 88.8f : xc;
    // n = round(x / ln2) by the 1.5*2^23 trick; its integer value sits in t's mantissa.
    float t = xc * 1.44269504088896341f + 12582912.0f;
    std::int32_t n = std::bit_cast<std::int32_t>(t) - 0x4B400000;
    float nf = t - 12582912.0f;
    // r = x - n*ln2 in two parts (Cody-Waite) so r stays accurate for large |n|.
    float r = xc - nf * 0.693359375f;
    r = r + nf * 2.12194440e-4f;
    // exp(r) for |r| <= ln2/2: Taylor to degree 7 (truncation 5e-9 relative).
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    // 2^n as two factors so that n in [-150, 128] never leaves the normal exponent range.
    std::int32_t n1 = n >> 1;
    std::int32_t n2 = n - n1;
    float s1 = std::bit_cast<float>((n1 + 127) << 23);
    float s2 = std::bit_cast<float>((n2 + 127) << 23);
    return p * s1 * s2;
}

// erfc(z) for z >= 0 as t*exp(poly(t) - z^2), t = 1/(1 + z/2): the Chebyshev fit from
// Press et al., Numerical Recipes (fractional error < 1.2e-7 for all z >= 0).
inline float erfc_nonneg(float z) {
    float t = 1.0f / (1.0f + 0.5f * z);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    return t * fast_exp(p - z * z);
}

// Standard normal CDF Phi(x) = erfc(-x/sqrt2)/2, computed from the small tail so it keeps
// full relative accuracy on both sides.
inline float normal_cdf(float x) {
    float z = x * 0.70710678118654752f;
    float az = z < 0.0f ? -z : z;
    float tail = 0.5f * erfc_nonneg(az);  // Phi(-|x|)
    return x < 0.0f ? tail : 1.0f - tail;
}

constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluTanhCubic = 0.044715f;

// gelu(x) = x * Phi(x)
inline float gelu_erf(float x) { return x * normal_cdf(x); }
inline float gelu_erf_grad(float x) {
    return normal_cdf(x) + x * kInvSqrt2Pi * fast_exp(-0.5f * x * x);
}

// 0.5x(1 + tanh(u)) with u = sqrt(2/pi)(x + 0.044715x^3) written as x*sigmoid(2u): no
// cancellation in 1 + tanh for negative x, and exp overflow gives the exact limit 0.
inline float gelu_tanh(float x) {
    float u = kSqrt2OverPi * (x + kGeluTanhCubic * x * x * x);
    return x / (1.0f + fast_exp(-2.0f * u));
}
inline float gelu_tanh_grad(float x) {
    float u = kSqrt2OverPi * (x + kGeluTanhCubic * x * x * x);
    float e = fast_exp(-2.0f * u);
    float s = 1.0f / (1.0f + e);
    // e*s rather than 1 - s, which cancels for large x; e = Inf (x << 0) means s = 0, 1-s = 1.
    float one_minus_s = e > 1e30f ? 1.0f : e * s;
    float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluTanhCubic * x * x);
    return s + x * s * one_minus_s * 2.0f * du;
}

// Squared ReLU as PyTorch's pow(relu(x), 2) and its autograd: relu(NaN) is NaN (x <= 0 is
// false), and the gradient is masked to 0 wherever x <= 0, even for an infinite dy.
inline float squared_relu(float x) { return x <= 0.0f ? 0.0f : x * x; }
inline float squared_relu_grad(float dy, float x) { return x <= 0.0f ? 0.0f : dy * (2.0f * x); }

}  // namespace gpt::cpu
