// GEMM (all transposes, leading dimensions, alpha/beta, strided batches, epilogues, mixed
// output type) against an fp64 reference computed from the same rounded inputs.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "backend_test_util.hpp"
#include "backend/cpu/blas.hpp"
#include "core/errors.hpp"

namespace gpt::test {
namespace {

double gelu_ref(double x, bool tanh_approx) {
    if (tanh_approx)
        return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

struct GemmCase {
    std::int64_t m, n, k;
    bool ta, tb;
    std::int64_t batch;
    float alpha, beta;
    GemmEpilogue epi;
    bool tanh_gelu;
    DType dtype, c_dtype;
};

void run_case(const GemmCase& c) {
    auto be = cpu_backend();
    const std::int64_t ar = c.ta ? c.k : c.m, ac = c.ta ? c.m : c.k;
    const std::int64_t br = c.tb ? c.n : c.k, bc = c.tb ? c.k : c.n;
    const std::int64_t lda = ac + 3, ldb = bc + 1, ldc = c.n + 2;  // padded rows
    const std::int64_t sa = ar * lda + 5, sb = br * ldb + 7, sc = c.m * ldc + 1;
    auto A = rounded(c.dtype, random_vec(sa * c.batch, 11));
    auto B = rounded(c.dtype, random_vec(sb * c.batch, 12));
    auto C0 = rounded(c.c_dtype, random_vec(sc * c.batch, 13));
    auto bias = rounded(c.dtype, random_vec(c.n, 14));
    Buf a(*be, c.dtype, A), b(*be, c.dtype, B), cb(*be, c.c_dtype, C0), bb(*be, c.dtype, bias);
    Buf aux(*be, c.c_dtype, sc * c.batch);
    if (c.beta == 0.0f) cb.poison();  // beta = 0 must not read C (NaN * 0 would show)
    GemmArgs g;
    g.trans_a = c.ta;
    g.trans_b = c.tb;
    g.m = c.m;
    g.n = c.n;
    g.k = c.k;
    g.a = a.p();
    g.lda = lda;
    g.b = b.p();
    g.ldb = ldb;
    g.c = cb.p();
    g.ldc = ldc;
    g.alpha = c.alpha;
    g.beta = c.beta;
    g.dtype = c.dtype;
    g.c_dtype = c.c_dtype;
    g.batch = c.batch;
    g.stride_a = sa;
    g.stride_b = sb;
    g.stride_c = sc;
    g.epilogue = c.epi;
    g.bias = bb.p();
    g.aux = aux.p();
    g.tanh_gelu = c.tanh_gelu;
    be->gemm(g);
    auto got = cb.get();
    auto got_aux = aux.get();
    const Tol out_tol = tol_for(c.c_dtype);
    for (std::int64_t t = 0; t < c.batch; ++t) {
        for (std::int64_t i = 0; i < c.m; ++i) {
            for (std::int64_t j = 0; j < c.n; ++j) {
                double acc = 0, mag = 0;
                for (std::int64_t l = 0; l < c.k; ++l) {
                    double x = c.ta ? A[t * sa + l * lda + i] : A[t * sa + i * lda + l];
                    double y = c.tb ? B[t * sb + j * ldb + l] : B[t * sb + l * ldb + j];
                    acc += x * y;
                    mag += std::abs(x * y);
                }
                const std::int64_t at = t * sc + i * ldc + j;
                double pre = c.alpha * acc;
                mag = std::abs(c.alpha) * mag;
                if (c.epi == GemmEpilogue::None) {
                    pre += c.beta == 0.0f ? 0.0 : c.beta * C0[at];
                    mag += std::abs(c.beta * C0[at]);
                } else {
                    pre += bias[j];
                    mag += std::abs(bias[j]);
                }
                // fp32 accumulation error grows with the sum of |terms|.
                const double acc_tol = 2e-7 * (c.k + 2) * mag;
                double want = c.epi == GemmEpilogue::BiasGelu ? gelu_ref(pre, c.tanh_gelu) : pre;
                double err = std::abs(got[at] - want);
                ASSERT_TRUE(err <= acc_tol + out_tol.atol + out_tol.rtol * std::abs(want))
                    << "batch " << t << " (" << i << "," << j << "): got " << got[at]
                    << " want " << want;
                if (c.epi == GemmEpilogue::BiasGelu) {
                    double e2 = std::abs(got_aux[at] - pre);
                    ASSERT_TRUE(e2 <= acc_tol + out_tol.atol + out_tol.rtol * std::abs(pre))
                        << "aux (" << i << "," << j << "): got " << got_aux[at] << " want " << pre;
                }
            }
            // Padding between rows of C is never written.
            for (std::int64_t j = c.n; j < ldc && i * ldc + j < sc; ++j) {
                const std::int64_t at = t * sc + i * ldc + j;
                if (c.beta == 0.0f) {
                    ASSERT_TRUE(std::isnan(got[at])) << "padding written at " << at;
                } else {
                    ASSERT_EQ(got[at], C0[at]) << "padding written at " << at;
                }
            }
        }
    }
}

class GemmTest : public ::testing::TestWithParam<DType> {};

// C[m, n] = A[m, k] B[k, n], all contiguous row-major.
GemmArgs row_major_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const void* a, const void* b, void* c,
                        DType t) {
    GemmArgs g;
    g.m = m;
    g.n = n;
    g.k = k;
    g.a = a;
    g.lda = k;
    g.b = b;
    g.ldb = n;
    g.c = c;
    g.ldc = n;
    g.dtype = t;
    g.c_dtype = t;
    return g;
}

TEST_P(GemmTest, AllTransposesAndShapes) {
    const DType t = GetParam();
    // The last two are above the threading threshold: split by columns, then by rows.
    const std::int64_t shapes[][3] = {{1, 1, 1},     {17, 33, 9},    {64, 48, 130},
                                      {5, 70, 31},   {20, 300, 40},  {40, 301, 100},
                                      {301, 40, 100}};
    for (auto& s : shapes)
        for (int ta = 0; ta < 2; ++ta)
            for (int tb = 0; tb < 2; ++tb) {
                SCOPED_TRACE(::testing::Message() << "m=" << s[0] << " n=" << s[1] << " k="
                                                  << s[2] << " ta=" << ta << " tb=" << tb);
                run_case({s[0], s[1], s[2], ta == 1, tb == 1, 1, 1.0f, 0.0f,
                          GemmEpilogue::None, false, t, t});
            }
}

TEST_P(GemmTest, AlphaBetaAndFp32Accumulation) {
    const DType t = GetParam();
    run_case({23, 19, 40, false, true, 1, 0.5f, 1.0f, GemmEpilogue::None, false, t, t});
    run_case({23, 19, 40, true, false, 1, -2.0f, 0.25f, GemmEpilogue::None, false, t, t});
    // Weight-gradient form: 16-bit operands, fp32 C accumulated with beta = 1.
    run_case({31, 17, 66, true, false, 1, 1.0f, 1.0f, GemmEpilogue::None, false, t,
              DType::F32});
}

TEST_P(GemmTest, StridedBatched) {
    const DType t = GetParam();
    run_case({9, 12, 8, false, true, 5, 0.125f, 0.0f, GemmEpilogue::None, false, t, t});
    run_case({33, 20, 17, true, false, 3, 1.0f, 1.0f, GemmEpilogue::None, false, t, t});
}

TEST_P(GemmTest, BiasAndBiasGeluEpilogues) {
    const DType t = GetParam();
    run_case({21, 35, 24, false, true, 1, 1.0f, 0.0f, GemmEpilogue::Bias, false, t, t});
    run_case({21, 35, 24, false, true, 2, 1.0f, 0.0f, GemmEpilogue::BiasGelu, false, t, t});
    run_case({21, 35, 24, false, true, 1, 1.0f, 0.0f, GemmEpilogue::BiasGelu, true, t, t});
}

TEST_P(GemmTest, OperandsLargerThanOneStagingBlock) {
    // 16-bit operands are staged in 1024-wide blocks along m, n and k: cross every edge.
    const DType t = GetParam();
    run_case({3, 1100, 1030, false, true, 1, 1.0f, 0.0f, GemmEpilogue::BiasGelu, false, t, t});
    run_case({1030, 2, 1100, true, false, 1, 0.5f, 1.0f, GemmEpilogue::None, false, t, t});
    run_case({1100, 3, 1030, false, false, 1, 1.0f, 1.0f, GemmEpilogue::None, false, t,
              DType::F32});
    run_case({4, 5, 0, false, false, 1, 1.0f, 0.5f, GemmEpilogue::None, false, t, t});
}

INSTANTIATE_TEST_SUITE_P(Types, GemmTest, ::testing::ValuesIn(kAllTypes),
                         [](const auto& info) { return dname(info.param); });

TEST(Gemm, RejectsBadArguments) {
    auto be = cpu_backend();
    Buf a(*be, DType::F32, 16), b(*be, DType::F32, 16), c(*be, DType::F32, 16);
    GemmArgs g = row_major_gemm(4, 4, 4, a.p(), b.p(), c.p(), DType::F32);
    g.epilogue = GemmEpilogue::Bias;
    EXPECT_THROW(be->gemm(g), InternalError);  // no bias
    g.epilogue = GemmEpilogue::None;
    g.lda = 3;
    EXPECT_THROW(be->gemm(g), InternalError);
    g.lda = 4;
    Buf dbias(*be, DType::F32, 4);
    g.bias_grad = static_cast<float*>(dbias.p());
    EXPECT_THROW(be->gemm(g), InternalError);  // the fused bias gradient needs op(A) = A^T
    g.trans_a = true;
    g.lda = 8;
    EXPECT_THROW(be->gemm(g), InternalError);  // ... and A contiguous
    g = row_major_gemm(4, 4, 4, a.p(), b.p(), c.p(), DType::F32);
    g.epilogue = GemmEpilogue::GeluGrad;
    EXPECT_THROW(be->gemm(g), InternalError);  // no pre-activation
    g.aux = a.p();
    g.ldc = 5;
    EXPECT_THROW(be->gemm(g), InternalError);  // C not contiguous
    g.ldc = 4;
    g.beta = 1.0f;
    EXPECT_THROW(be->gemm(g), InternalError);  // epilogues overwrite C
}

// GeluGrad is the GEMM rounded to C's type followed by GELU's backward, exactly.
TEST_P(GemmTest, GeluGradEpilogueIsTheProductThroughGeluBackward) {
    const DType t = GetParam();
    auto be = cpu_backend();
    const std::int64_t m = 29, n = 40, k = 33;
    auto A = rounded(t, random_vec(m * k, 221)), B = rounded(t, random_vec(k * n, 222));
    auto pre = rounded(t, random_vec(m * n, 223, -3.0, 3.0));
    for (bool tanh_gelu : {false, true}) {
        Buf a(*be, t, A), b(*be, t, B), aux(*be, t, pre), fused(*be, t, m * n), ref(*be, t, m * n);
        GemmArgs g = row_major_gemm(m, n, k, a.p(), b.p(), ref.p(), t);
        be->gemm(g);
        be->gelu_backward(ref.p(), aux.p(), ref.p(), m * n, tanh_gelu, t);
        g.c = fused.p();
        g.epilogue = GemmEpilogue::GeluGrad;
        g.aux = aux.p();
        g.tanh_gelu = tanh_gelu;
        be->gemm(g);
        const auto got = fused.get(), want = ref.get();
        ASSERT_EQ(got, want) << "tanh " << tanh_gelu;
        // Not the plain product: the derivative was applied (it is 1 nowhere here).
        std::size_t differs = 0;
        for (std::int64_t i = 0; i < m * n; ++i) {
            double acc = 0;
            for (std::int64_t l = 0; l < k; ++l) acc += A[i / n * k + l] * B[l * n + i % n];
            differs += std::abs(got[i] - acc) > 1e-2 * (1 + std::abs(acc));
        }
        EXPECT_GT(differs, static_cast<std::size_t>(m * n / 2)) << "tanh " << tanh_gelu;
    }
}

// The weight-gradient GEMM with the bias gradient fused: dW += dY^T X and dbias += the column
// sums of dY, both accumulated, for every operand type.
TEST_P(GemmTest, FusedBiasGradientAccumulates) {
    const DType t = GetParam();
    auto be = cpu_backend();
    const std::int64_t T = 37, in = 20, out = 24;
    auto dy = rounded(t, random_vec(T * out, 211));
    auto x = rounded(t, random_vec(T * in, 212));
    auto dw0 = random_vec(out * in, 213), db0 = random_vec(out, 214);
    std::vector<double> want_dw = dw0, want_db = db0;
    for (std::int64_t r = 0; r < T; ++r)
        for (std::int64_t o = 0; o < out; ++o) {
            want_db[o] += dy[r * out + o];
            for (std::int64_t i = 0; i < in; ++i) want_dw[o * in + i] += dy[r * out + o] * x[r * in + i];
        }
    Buf a(*be, t, dy), b(*be, t, x), c(*be, DType::F32, dw0), db(*be, DType::F32, db0);
    GemmArgs g;
    g.trans_a = true;
    g.m = out;
    g.n = in;
    g.k = T;
    g.a = a.p();
    g.lda = out;
    g.b = b.p();
    g.ldb = in;
    g.c = c.p();
    g.ldc = in;
    g.beta = 1.0f;
    g.dtype = t;
    g.c_dtype = DType::F32;
    g.bias_grad = static_cast<float*>(db.p());
    be->gemm(g);
    EXPECT_TRUE(all_close(c.get(), want_dw, {1e-5, 1e-5}));
    EXPECT_TRUE(all_close(db.get(), want_db, {1e-5, 1e-5}));
}

}  // namespace
}  // namespace gpt::test

namespace gpt::test {
namespace {

TEST(Gemm, CalledFromInsideAParallelRegion) {
    // Nested regions get a team of one: the row/column split must follow the team that
    // actually runs, or blocks of C would be left unwritten.
    auto be = cpu_backend();
    const std::int64_t m = 96, n = 300, k = 40;
    auto A = rounded(DType::F32, random_vec(m * k, 201));
    auto B = rounded(DType::F32, random_vec(k * n, 202));
    std::vector<double> want(m * n, 0.0);
    for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t l = 0; l < k; ++l)
            for (std::int64_t j = 0; j < n; ++j) want[i * n + j] += A[i * k + l] * B[l * n + j];
    Buf a(*be, DType::F32, A), b(*be, DType::F32, B), c0(*be, DType::F32, m * n),
        c1(*be, DType::F32, m * n);
    Buf* outs[2] = {&c0, &c1};
    int team = 1;
#pragma omp parallel num_threads(2)
    {
#pragma omp single
        team = omp_get_num_threads();
        GemmArgs g = row_major_gemm(m, n, k, a.p(), b.p(), outs[omp_get_thread_num() % 2]->p(), DType::F32);
        // One backend per thread is the documented rule; here each thread owns its output
        // and the fp32 path uses no backend scratch, which is what this test relies on.
        be->gemm(g);
    }
    EXPECT_TRUE(all_close(c0.get(), want, {1e-5, 1e-5}));
    if (team > 1) {
        EXPECT_TRUE(all_close(c1.get(), want, {1e-5, 1e-5}));
    }
}

TEST(BlasKernels, NotTheGenericFallbackOnVectorCpus) {
    auto be = cpu_backend();  // selects the kernels on construction
    const std::string core = cpu::ensure_blas_kernels();
    if (std::getenv("OPENBLAS_CORETYPE"))
        GTEST_SKIP() << "OPENBLAS_CORETYPE is set: the user chose the kernels (" << core << ")";
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
        GTEST_SKIP() << "CPU without AVX2/FMA: the generic kernels are the right ones";
#else
    GTEST_SKIP() << "not x86: OpenBLAS's own CPU detection applies";
#endif
    EXPECT_NE(core, "Prescott");
    EXPECT_NE(core, "Core2");
    EXPECT_NE(core, "Nehalem");
}

}  // namespace
}  // namespace gpt::test
