// The FP8 ops of the CPU backend (issue 34): casts against core/fp8.hpp element by element
// (exact: a cast has one correct answer), the transposed copy, the NaN-sticky amax, current
// scales against core/fp8_scaling.hpp, FP8 GEMMs against operands quantised by hand (the
// bound in fp8_gemm_reference.hpp), and the layout rules every backend enforces.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backend_test_util.hpp"
#include "core/errors.hpp"
#include "core/fp8_scaling.hpp"
#include "fp8_gemm_reference.hpp"

namespace gpt::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(Fp8Ops, CastQuantisesEachElementAndItsTranspose) {
    auto be = cpu_backend();
    const std::int64_t rows = 37, cols = 70;  // neither a multiple of a tile
    for (DType t : kAllTypes)
        for (Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2}) {
            SCOPED_TRACE(dname(t) + (f == Fp8Format::E4M3 ? " e4m3" : " e5m2"));
            std::vector<double> v = rounded(t, random_vec(static_cast<std::size_t>(rows * cols), 7, -40.0, 40.0));
            v[5] = 1e30;  // beyond the format after scaling: saturates
            v[9] = -1e30;
            if (t == DType::F32) v[11] = 1e-30;  // below the smallest subnormal: zero
            Buf x(*be, t, v);
            const float scale = 11.3f;
            std::vector<std::uint8_t> q(v.size(), 0xAA), qt(v.size(), 0xAA);
            float amax = 0.25f;
            be->cast_to_fp8(x.p(), t, rows, cols, f, &scale, q.data(), qt.data(), &amax);
            const std::vector<double> seen = x.get();
            double want_amax = 0.25;
            for (std::int64_t r = 0; r < rows; ++r)
                for (std::int64_t c = 0; c < cols; ++c) {
                    const double xv = seen[static_cast<std::size_t>(r * cols + c)];
                    const std::uint8_t want = float_to_fp8(static_cast<float>(xv) * scale, f);
                    ASSERT_EQ(q[static_cast<std::size_t>(r * cols + c)], want) << "at " << r << "," << c;
                    ASSERT_EQ(qt[static_cast<std::size_t>(c * rows + r)], want) << "transposed at " << r << "," << c;
                    want_amax = std::max(want_amax, std::abs(xv));
                }
            EXPECT_EQ(amax, static_cast<float>(want_amax));
            // Either output alone writes the same codes.
            std::vector<std::uint8_t> only_t(v.size(), 0);
            be->cast_to_fp8(x.p(), t, rows, cols, f, &scale, nullptr, only_t.data(), nullptr);
            EXPECT_EQ(only_t, qt);
        }
}

TEST(Fp8Ops, CastWithBiasGradIsTheCastThenBiasGrad) {
    // cast_to_fp8_bias_grad: the cast's codes, transpose and amax, and dbias += the column
    // sums, as bias_grad adds them (the CPU backend composes the two: the same bits).
    auto be = cpu_backend();
    const std::int64_t rows = 37, cols = 48;
    for (DType t : kAllTypes) {
        SCOPED_TRACE(dname(t));
        Buf dy(*be, t, rounded(t, random_vec(static_cast<std::size_t>(rows * cols), 9, -3.0, 3.0)));
        const float scale = 5.5f;
        const std::size_t n = static_cast<std::size_t>(rows * cols), c = static_cast<std::size_t>(cols);
        std::vector<std::uint8_t> q1(n), qt1(n), q2(n), qt2(n);
        float amax1 = 0.5f, amax2 = 0.5f;
        std::vector<float> db1(c, 0.25f), db2(c, 0.25f);
        be->cast_to_fp8_bias_grad(dy.p(), t, rows, cols, Fp8Format::E5M2, &scale, q1.data(), qt1.data(), &amax1,
                                  db1.data());
        be->cast_to_fp8(dy.p(), t, rows, cols, Fp8Format::E5M2, &scale, q2.data(), qt2.data(), &amax2);
        be->bias_grad(dy.p(), db2.data(), rows, cols, t);
        EXPECT_EQ(q1, q2);
        EXPECT_EQ(qt1, qt2);
        EXPECT_EQ(amax1, amax2);
        EXPECT_EQ(db1, db2);
        EXPECT_NE(db1, std::vector<float>(c, 0.25f)) << "dbias untouched";
    }
    const float one = 1.0f;
    std::vector<std::uint8_t> q(4);
    Buf x(*be, DType::BF16, std::vector<double>(4, 1.0));
    EXPECT_THROW(be->cast_to_fp8_bias_grad(x.p(), DType::BF16, 2, 2, Fp8Format::E5M2, &one, q.data(), nullptr,
                                           nullptr, nullptr),
                 InternalError);
}

TEST(Fp8Ops, AmaxIsTheLargestMagnitudeAndNaNSticks) {
    auto be = cpu_backend();
    for (DType t : kAllTypes) {
        SCOPED_TRACE(dname(t));
        std::vector<double> v = rounded(t, random_vec(5000, 3, -2.0, 2.0));
        v[4321] = -7.5;
        Buf x(*be, t, v);
        float amax = 1.0f;
        be->amax(x.p(), t, 5000, &amax);
        EXPECT_EQ(amax, 7.5f);
        float larger = 9.0f;  // a running maximum is kept
        be->amax(x.p(), t, 5000, &larger);
        EXPECT_EQ(larger, 9.0f);
        v[17] = std::numeric_limits<double>::quiet_NaN();
        x.set(v);
        float m = 0.0f;
        be->amax(x.p(), t, 5000, &m);
        EXPECT_TRUE(std::isnan(m));
        float from_cast = 0.0f;
        std::vector<std::uint8_t> q(5000);
        const float one = 1.0f;
        be->cast_to_fp8(x.p(), t, 50, 100, Fp8Format::E4M3, &one, q.data(), nullptr, &from_cast);
        EXPECT_TRUE(std::isnan(from_cast));
        EXPECT_EQ(q[17], 0x7F);  // NaN's code
        float stays = kNaN;
        v[17] = 0.0;
        x.set(v);
        be->amax(x.p(), t, 5000, &stays);
        EXPECT_TRUE(std::isnan(stays)) << "a NaN amax must not be replaced by a later finite one";
    }
}

TEST(Fp8Ops, CurrentScalesFollowTheScalingRule) {
    auto be = cpu_backend();
    const std::vector<float> amax{0.0f, kNaN, std::numeric_limits<float>::infinity(), 1e-45f, 2.0f, 448.0f};
    for (Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2}) {
        std::vector<float> scale(amax.size()), inv(amax.size());
        be->fp8_current_scales(amax.data(), scale.data(), inv.data(), static_cast<std::int64_t>(amax.size()), f,
                               0x1.fep127f);
        for (std::size_t i = 0; i < amax.size(); ++i) {
            EXPECT_EQ(scale[i], current_scale(amax[i], f, 0x1.fep127f)) << i;
            EXPECT_EQ(inv[i], 1.0f / scale[i]) << i;
        }
        EXPECT_EQ(scale[3], 0x1.fep127f);  // fp8_max / 1e-45 overflows
    }
}

TEST(Fp8Ops, GemmOfHandQuantisedOperandsIsWithinItsBound) {
    auto be = cpu_backend();
    std::uint32_t seed = 100;
    for (const Fp8GemmCase& c : kFp8GemmCases) {
        SCOPED_TRACE(detail::concat("m=", c.m, " n=", c.n, " k=", c.k, " -> ", dname(c.c_dtype),
                                    " beta=", c.beta));
        const Fp8Operands o = make_fp8_operands(c, seed += 10);
        Buf out(*be, c.c_dtype, o.c0);
        Buf bias(*be, DType::BF16, o.bias);
        const GemmArgs g = fp8_gemm_args(c, o.a.data(), o.b.data(), out.p(), bias.p(), &o.a_scale_inv,
                                         &o.b_scale_inv);
        be->gemm(g);
        std::vector<double> exact, bound;
        fp8_gemm_exact(c, o, exact, bound);
        EXPECT_TRUE(within_bound(out.get(), exact, bound));
    }
}

TEST(Fp8Ops, GemmRefusesLayoutsHopperCannotRun) {
    auto be = cpu_backend();
    const Fp8GemmCase c = kFp8GemmCases[0];
    const Fp8Operands o = make_fp8_operands(c, 1);
    Buf out(*be, c.c_dtype, static_cast<std::size_t>(c.m * c.n));
    const GemmArgs ok = fp8_gemm_args(c, o.a.data(), o.b.data(), out.p(), nullptr, &o.a_scale_inv, &o.b_scale_inv);
    be->gemm(ok);
    GemmArgs g = ok;
    g.trans_a = true;
    g.lda = c.m;
    EXPECT_THROW(be->gemm(g), InternalError);  // op(A) = A^T: not Hopper's layout
    g = ok;
    g.trans_b = false;
    g.ldb = c.n;
    EXPECT_THROW(be->gemm(g), InternalError);
    g = ok;
    g.fp8.a_format = g.fp8.b_format = Fp8Format::E5M2;
    EXPECT_THROW(be->gemm(g), InternalError);
    g = ok;
    g.m = 30;  // not a multiple of 16
    EXPECT_THROW(be->gemm(g), InternalError);
    g = ok;
    g.fp8.b_scale_inv = nullptr;
    EXPECT_THROW(be->gemm(g), InternalError);
    const float one = 1.0f;
    EXPECT_THROW(be->cast_to_fp8(out.p(), DType::BF16, 2, 2, Fp8Format::E4M3, &one, nullptr, nullptr, nullptr),
                 InternalError);
}

}  // namespace
}  // namespace gpt::test
