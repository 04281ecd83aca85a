// GELU (exact and tanh) and squared ReLU forward/backward, bias add/grad, add, accumulate,
// scale and casts.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backend_test_util.hpp"

namespace gpt::test {
namespace {

double gelu_ref(double x, bool th) {
    if (th) return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}
double gelu_grad_ref(double x, bool th) {
    if (th) {
        double k = std::sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x);
        double t = std::tanh(u);
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
    }
    return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

class ElementwiseTest : public ::testing::TestWithParam<DType> {};

TEST(GeluReference, GradientMatchesFiniteDifferences) {
    for (bool th : {false, true})
        for (double x = -6.0; x <= 6.0; x += 0.37)
            EXPECT_NEAR((gelu_ref(x + 1e-6, th) - gelu_ref(x - 1e-6, th)) / 2e-6,
                        gelu_grad_ref(x, th), 1e-7);
}

TEST_P(ElementwiseTest, Gelu) {
    const DType t = GetParam();
    auto be = cpu_backend();
    for (std::int64_t n : {1, 37, 4099, 40000, (1 << 20) + 7}) {
        auto x = rounded(t, random_vec(n, 31, -9.0, 9.0));
        x[0] = 0.0;
        if (n > 3) {  // far tails: exp overflow and underflow inside the kernels
            x[1] = -30.0;
            x[2] = 30.0;
            x[3] = -200.0;
        }
        auto dy = rounded(t, random_vec(n, 32));
        for (bool th : {false, true}) {
            SCOPED_TRACE(::testing::Message() << "n=" << n << " tanh=" << th);
            std::vector<double> y(n), dx(n);
            for (std::int64_t i = 0; i < n; ++i) {
                y[i] = gelu_ref(x[i], th);
                dx[i] = dy[i] * gelu_grad_ref(x[i], th);
            }
            Buf bx(*be, t, x), by(*be, t, n), bdy(*be, t, dy), bdx(*be, t, n);
            be->gelu_forward(bx.p(), by.p(), n, th, t);
            // fp32: a few ulp of the result plus 1e-7 absolute in the far negative tail.
            Tol tl = t == DType::F32 ? Tol{1e-6, 1e-7} : tol_for(t);
            EXPECT_TRUE(all_close(by.get(), y, tl));
            be->gelu_backward(bdy.p(), bx.p(), bdx.p(), n, th, t);
            EXPECT_TRUE(all_close(bdx.get(), dx, tl));
            // dx may alias dy
            be->gelu_backward(bdy.p(), bx.p(), bdy.p(), n, th, t);
            EXPECT_TRUE(all_close(bdy.get(), bdx.get(), {0, 0}));
        }
    }
}

// Squared ReLU is exact arithmetic rounded once: x*x and dy*(2x) of values stored in T are
// products of two floats, exact in double, so fp32 rounds them once and a 16-bit T twice
// (fp32, then T), as PyTorch's bf16 pow and mul compute in fp32 and round. Expected bit
// for bit, specials included: relu(NaN) is NaN, the gradient is 0 wherever x <= 0 (even
// for an infinite dy: PyTorch's relu backward masks it) and NaN where x is.
TEST_P(ElementwiseTest, SquaredRelu) {
    const DType t = GetParam();
    auto be = cpu_backend();
    const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
    auto f32 = [](double v) { return static_cast<double>(static_cast<float>(v)); };
    for (std::int64_t n : {1, 37, 4099, (1 << 20) + 7}) {
        SCOPED_TRACE(::testing::Message() << "n=" << n);
        auto x = rounded(t, random_vec(n, 41, -3.0, 3.0));
        auto dy = rounded(t, random_vec(n, 42, -2.0, 2.0));
        x[0] = 0.0;
        if (n > 7) {
            x[1] = -0.0;
            x[2] = nan;
            x[3] = -2.0, dy[3] = inf;  // masked: 0, not inf * 0
            x[4] = 0.0, dy[4] = -inf;
            x[5] = 1.5, dy[5] = inf;
            x[6] = round_to(t, t == DType::F16 ? 60000.0 : 1e30);  // the square overflows to inf
            x[7] = -inf;
        }
        std::vector<double> y(n), dx(n);
        for (std::int64_t i = 0; i < n; ++i) {
            const bool pos = x[i] > 0.0 || std::isnan(x[i]);
            y[i] = pos ? round_to(t, f32(x[i] * x[i])) : 0.0;
            dx[i] = pos ? round_to(t, f32(dy[i] * (2.0 * x[i]))) : 0.0;
        }
        Buf bx(*be, t, x), by(*be, t, n), bdy(*be, t, dy), bdx(*be, t, n);
        be->squared_relu_forward(bx.p(), by.p(), n, t);
        be->squared_relu_backward(bdy.p(), bx.p(), bdx.p(), n, t);
        const std::vector<double> gy = by.get(), gdx = bdx.get();
        int bad = 0;
        auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
        for (std::int64_t i = 0; i < n; ++i)
            if (!same(gy[i], y[i]) || !same(gdx[i], dx[i])) {
                if (++bad <= 3)
                    ADD_FAILURE() << "at " << i << " x " << x[i] << " dy " << dy[i] << ": y " << gy[i] << " (expected "
                                  << y[i] << "), dx " << gdx[i] << " (expected " << dx[i] << ")";
            }
        EXPECT_EQ(bad, 0);
        if (n > 7) EXPECT_FALSE(std::signbit(gy[1])) << "relu(-0)^2 is +0";
        // dx may alias dy
        be->squared_relu_backward(bdy.p(), bx.p(), bdy.p(), n, t);
        const std::vector<double> alias = bdy.get();
        for (std::int64_t i = 0; i < n; ++i) ASSERT_TRUE(same(alias[i], gdx[i])) << i;
    }
}

TEST_P(ElementwiseTest, BiasAddAndBiasGrad) {
    const DType t = GetParam();
    auto be = cpu_backend();
    const std::int64_t shapes[][2] = {{1, 3}, {7, 19}, {300, 257}, {3, 2500}, {1030, 1024}};
    for (auto& s : shapes) {
        const std::int64_t rows = s[0], cols = s[1];
        auto x = rounded(t, random_vec(rows * cols, 41));
        auto bias = rounded(t, random_vec(cols, 42));
        Buf bx(*be, t, x), bb(*be, t, bias);
        be->bias_add(bx.p(), bb.p(), rows, cols, t);
        std::vector<double> want(rows * cols), colsum(cols);
        auto d0 = random_vec(cols, 43);
        for (std::int64_t i = 0; i < rows; ++i)
            for (std::int64_t j = 0; j < cols; ++j) {
                want[i * cols + j] = x[i * cols + j] + bias[j];
            }
        EXPECT_TRUE(all_close(bx.get(), want, tol_for(t)));
        Buf dbias(*be, DType::F32, d0);
        be->bias_grad(bx.p(), dbias.f32(), rows, cols, t);
        auto stored = bx.get();
        for (std::int64_t j = 0; j < cols; ++j) {
            colsum[j] = static_cast<float>(d0[j]);
            for (std::int64_t i = 0; i < rows; ++i) colsum[j] += stored[i * cols + j];
        }
        EXPECT_TRUE(all_close(dbias.get(), colsum, {1e-5, 1e-6 * rows}));
    }
}

TEST_P(ElementwiseTest, AddAccumulateScale) {
    const DType t = GetParam();
    auto be = cpu_backend();
    for (std::int64_t n : {1, 1023, 1025, 50000, (1 << 20) + 3}) {
        auto a = rounded(t, random_vec(n, 51)), b = rounded(t, random_vec(n, 52));
        Buf ba(*be, t, a), bb(*be, t, b), by(*be, t, n);
        be->add(ba.p(), bb.p(), by.p(), n, t);
        std::vector<double> sum(n), scaled(n), acc(n);
        for (std::int64_t i = 0; i < n; ++i) sum[i] = a[i] + b[i];
        EXPECT_TRUE(all_close(by.get(), sum, tol_for(t)));
        be->add(ba.p(), bb.p(), ba.p(), n, t);  // aliasing output
        EXPECT_TRUE(all_close(ba.get(), by.get(), {0, 0}));

        auto y0 = rounded(DType::F32, random_vec(n, 53));
        Buf y(*be, DType::F32, y0);
        be->accumulate_f32(bb.p(), y.f32(), n, t);
        for (std::int64_t i = 0; i < n; ++i) acc[i] = y0[i] + b[i];
        EXPECT_TRUE(all_close(y.get(), acc, {1e-6, 1e-7}));

        be->scale(bb.p(), -0.75f, n, t);
        for (std::int64_t i = 0; i < n; ++i) scaled[i] = -0.75 * b[i];
        EXPECT_TRUE(all_close(bb.get(), scaled, tol_for(t)));
    }
}

INSTANTIATE_TEST_SUITE_P(Types, ElementwiseTest, ::testing::ValuesIn(kAllTypes),
                         [](const auto& info) { return dname(info.param); });

TEST(Cast, EveryPairRoundsOnceAndKeepsSpecials) {
    auto be = cpu_backend();
    auto v = random_vec(3001, 61, -70000.0, 70000.0);
    v[0] = std::numeric_limits<double>::infinity();
    v[1] = -std::numeric_limits<double>::infinity();
    v[2] = std::numeric_limits<double>::quiet_NaN();
    v[3] = -0.0;
    v[4] = 1e-6;
    for (DType s : kAllTypes)
        for (DType d : kAllTypes) {
            SCOPED_TRACE(dname(s) + " -> " + dname(d));
            auto src = rounded(s, v);
            Buf bs(*be, s, src), bd(*be, d, src.size());
            be->cast(bs.p(), s, bd.p(), d, static_cast<std::int64_t>(src.size()));
            auto got = bd.get();
            for (std::size_t i = 0; i < src.size(); ++i) {
                double want = round_to(d, src[i]);
                if (std::isnan(want)) {
                    ASSERT_TRUE(std::isnan(got[i])) << i;
                } else {
                    ASSERT_EQ(got[i], want) << i;
                    ASSERT_EQ(std::signbit(got[i]), std::signbit(want)) << i;
                }
            }
        }
}

}  // namespace
}  // namespace gpt::test
