// FP8 GEMM operands quantised by hand and the exact result with its error bound, shared by
// the CPU backend's test (test_fp8_ops.cpp) and the CUDA backend's (test_cuda_fp8.cpp).
//
// The bound (u32 = 2^-24; products of two FP8 values have at most 4 + 4 significant bits, so
// every product is exact in fp32): summing k of them in fp32 in any order errs by at most
// gamma_k * sum|a_i b_i| (Higham, eq. 3.5); applying the two scales and alpha (three
// multiplications, in whatever order the backend takes them), beta*C and the bias adds five
// more operations: 2 (k + 5) u32 (|alpha sa sb| sum|a_i b_i| + |beta C| + |bias|) bounds them
// with the same factor 2 as the 16-bit GEMM test (truncating tensor-core adders). Then the
// rounding to C's type. A missing or doubled scale is off by a factor of 10 to 1000 here (the
// scales are far from 1), a swapped format by far more: orders beyond the bound.
//
// A case with fast_accum (the forward GEMMs' GemmArgs::Fp8::fast_accum) adds the emulator's
// model of the tensor cores' unpromoted accumulator (tests/cuda_emu/cublaslt.cpp, dot_fast):
// one truncation to 14 significant bits per 32-deep k step, each at most 2^-13 of the running
// sum, itself at most sum|a_i b_i|: ceil(k / 32) 2^-13 |alpha sa sb| sum|a_i b_i| more. The
// CPU backend accumulates in fp32 either way, inside the smaller part of the bound.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "backend/backend.hpp"
#include "backend_test_util.hpp"
#include "core/fp8.hpp"

namespace gpt::test {

struct Fp8GemmCase {
    std::int64_t m, n, k;
    Fp8Format a_format, b_format;
    DType c_dtype;
    GemmEpilogue epilogue;  // None or Bias
    float alpha, beta;
    bool fast_accum = false;
};

struct Fp8Operands {
    std::vector<std::uint8_t> a, b;  // A [m, k], B [n, k] (op(B) = B^T), codes
    float a_scale_inv = 1.0f, b_scale_inv = 1.0f;
    std::vector<double> c0, bias;  // C's initial values (read when beta != 0), bias [n]
};

// x uniform in [-range, range] quantised with scale = fp8_max / range, so the codes span the
// format; scale_inv is what the GEMM multiplies back.
inline std::vector<std::uint8_t> quantise_random(std::size_t n, double range, Fp8Format f,
                                                 std::uint32_t seed, float* scale_inv) {
    const float scale = static_cast<float>(fp8_max(f) / range);
    *scale_inv = 1.0f / scale;
    std::vector<std::uint8_t> q(n);
    const std::vector<double> x = random_vec(n, seed, -range, range);
    for (std::size_t i = 0; i < n; ++i) q[i] = float_to_fp8(static_cast<float>(x[i]) * scale, f);
    return q;
}

inline Fp8Operands make_fp8_operands(const Fp8GemmCase& c, std::uint32_t seed) {
    Fp8Operands o;
    o.a = quantise_random(static_cast<std::size_t>(c.m * c.k), 2.5, c.a_format, seed, &o.a_scale_inv);
    o.b = quantise_random(static_cast<std::size_t>(c.n * c.k), 0.03, c.b_format, seed + 1, &o.b_scale_inv);
    o.c0 = rounded(c.c_dtype, random_vec(static_cast<std::size_t>(c.m * c.n), seed + 2));
    o.bias = rounded(DType::BF16, random_vec(static_cast<std::size_t>(c.n), seed + 3));
    return o;
}

// The exact C and its bound (see the file comment); the bias has type bf16 (the run's dtype).
inline void fp8_gemm_exact(const Fp8GemmCase& c, const Fp8Operands& o, std::vector<double>& exact,
                           std::vector<double>& bound) {
    const double u32 = std::ldexp(1.0, -24), acc = 2.0 * static_cast<double>(c.k + 5) * u32;
    const double scale = static_cast<double>(c.alpha) * o.a_scale_inv * o.b_scale_inv;
    exact.assign(static_cast<std::size_t>(c.m * c.n), 0.0);
    bound.assign(exact.size(), 0.0);
    for (std::int64_t i = 0; i < c.m; ++i)
        for (std::int64_t j = 0; j < c.n; ++j) {
            double s = 0.0, sa = 0.0;
            for (std::int64_t q = 0; q < c.k; ++q) {
                const double p = static_cast<double>(fp8_to_float(o.a[i * c.k + q], c.a_format)) *
                                 fp8_to_float(o.b[j * c.k + q], c.b_format);
                s += p;
                sa += std::abs(p);
            }
            const std::size_t at = static_cast<std::size_t>(i * c.n + j);
            double e = scale * s, mag = std::abs(scale) * sa;
            if (c.beta != 0.0f) {
                e += c.beta * o.c0[at];
                mag += std::abs(c.beta * o.c0[at]);
            }
            if (c.epilogue == GemmEpilogue::Bias) {
                e += o.bias[static_cast<std::size_t>(j)];
                mag += std::abs(o.bias[static_cast<std::size_t>(j)]);
            }
            exact[at] = e;
            bound[at] = acc * mag + output_rounding(c.c_dtype, e);
            if (c.fast_accum)
                bound[at] += static_cast<double>((c.k + 31) / 32) * std::ldexp(1.0, -13) * std::abs(scale) * sa;
        }
}

// The GemmArgs of the case over operand pointers of some backend.
inline GemmArgs fp8_gemm_args(const Fp8GemmCase& c, const void* a, const void* b, void* out,
                              const void* bias, const float* a_scale_inv, const float* b_scale_inv) {
    GemmArgs g;
    g.trans_b = true;
    g.m = c.m;
    g.n = c.n;
    g.k = c.k;
    g.a = a;
    g.lda = c.k;
    g.b = b;
    g.ldb = c.k;
    g.c = out;
    g.ldc = c.n;
    g.alpha = c.alpha;
    g.beta = c.beta;
    g.dtype = DType::BF16;
    g.c_dtype = c.c_dtype;
    g.epilogue = c.epilogue;
    g.bias = c.epilogue == GemmEpilogue::Bias ? bias : nullptr;
    g.fp8.on = true;
    g.fp8.a_format = c.a_format;
    g.fp8.b_format = c.b_format;
    g.fp8.a_scale_inv = a_scale_inv;
    g.fp8.b_scale_inv = b_scale_inv;
    g.fp8.fast_accum = c.fast_accum;
    return g;
}

inline const Fp8GemmCase kFp8GemmCases[] = {
    // forward: E4M3 x E4M3 into bf16, with and without the bias epilogue
    {32, 48, 64, Fp8Format::E4M3, Fp8Format::E4M3, DType::BF16, GemmEpilogue::None, 1.0f, 0.0f},
    {48, 32, 80, Fp8Format::E4M3, Fp8Format::E4M3, DType::BF16, GemmEpilogue::Bias, 1.0f, 0.0f},
    // data gradient (hybrid): E5M2 gradient x E4M3 weight, and the reverse order
    {64, 16, 32, Fp8Format::E5M2, Fp8Format::E4M3, DType::F16, GemmEpilogue::None, 1.0f, 0.0f},
    {16, 64, 48, Fp8Format::E4M3, Fp8Format::E5M2, DType::BF16, GemmEpilogue::None, 1.0f, 0.0f},
    // weight gradient: accumulated into an fp32 main_grad (beta = 1)
    {32, 32, 96, Fp8Format::E5M2, Fp8Format::E4M3, DType::F32, GemmEpilogue::None, 1.0f, 1.0f},
    // alpha and beta both in play
    {16, 16, 1040, Fp8Format::E4M3, Fp8Format::E4M3, DType::F32, GemmEpilogue::None, 0.5f, -2.0f},
    // forward GEMMs with fast accumulation, into bf16 with the bias and into fp32 (k long
    // enough for the accumulator's truncations to show against the fp32 bound)
    {32, 48, 64, Fp8Format::E4M3, Fp8Format::E4M3, DType::BF16, GemmEpilogue::Bias, 1.0f, 0.0f, true},
    {16, 16, 1040, Fp8Format::E4M3, Fp8Format::E4M3, DType::F32, GemmEpilogue::None, 1.0f, 0.0f, true},
};

}  // namespace gpt::test
