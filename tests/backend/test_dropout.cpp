// Dropout, bias-dropout-add and backward: masks equal philox(seed, offset + i) exactly,
// results are reproducible, keep rate and scaling are right.
#include <gtest/gtest.h>

#include <cmath>

#include "backend_test_util.hpp"
#include "core/errors.hpp"
#include "core/philox.hpp"

namespace gpt::test {
namespace {

class DropoutTest : public ::testing::TestWithParam<DType> {};

TEST_P(DropoutTest, ForwardMatchesPhiloxMaskAndIsReproducible) {
    const DType t = GetParam();
    auto be = cpu_backend();
    const float p = 0.3f;
    for (std::int64_t n : {1, 5, 1029, 70001, (1 << 20) + 5}) {
        for (std::uint64_t offset : {0ull, 3ull, (1ull << 33) + 1}) {
            auto x = rounded(t, random_vec(n, 71, 0.5, 1.5));  // never 0, so drops show
            Buf bx(*be, t, x), by(*be, t, n), by2(*be, t, n);
            be->dropout_forward(bx.p(), by.p(), n, p, 1234, offset, t);
            be->dropout_forward(bx.p(), by2.p(), n, p, 1234, offset, t);
            std::vector<double> want(n);
            const std::uint32_t thr = dropout_threshold(p);
            for (std::int64_t i = 0; i < n; ++i)
                want[i] = dropout_keep(1234, offset + i, thr) ? x[i] / (1.0 - p) : 0.0;
            EXPECT_TRUE(all_close(by.get(), want, tol_for(t)));
            EXPECT_TRUE(all_close(by2.get(), by.get(), {0, 0}));
            // in place
            be->dropout_forward(bx.p(), bx.p(), n, p, 1234, offset, t);
            EXPECT_TRUE(all_close(bx.get(), by.get(), {0, 0}));
        }
    }
}

TEST(Dropout, KeepRateScalingAndSeeds) {
    auto be = cpu_backend();
    const std::int64_t n = 400000;
    for (float p : {0.1f, 0.5f}) {
        Buf ones(*be, DType::F32, std::vector<double>(n, 1.0)), y(*be, DType::F32, n);
        be->dropout_forward(ones.p(), y.p(), n, p, 99, 0, DType::F32);
        auto v = y.get();
        std::int64_t kept = 0;
        double total = 0;
        for (double e : v) {
            ASSERT_TRUE(e == 0.0 || std::abs(e - 1.0 / (1.0 - p)) < 1e-6) << e;
            kept += e != 0.0;
            total += e;
        }
        const double rate = static_cast<double>(kept) / n;
        const double sigma = std::sqrt(p * (1 - p) / n);
        EXPECT_NEAR(rate, 1.0 - p, 5 * sigma);
        EXPECT_NEAR(total / n, 1.0, 5 * sigma / (1 - p));  // expectation preserved
        Buf y2(*be, DType::F32, n);
        be->dropout_forward(ones.p(), y2.p(), n, p, 100, 0, DType::F32);
        auto v2 = y2.get();
        std::int64_t same = 0;
        for (std::int64_t i = 0; i < n; ++i) same += (v[i] != 0) == (v2[i] != 0);
        EXPECT_LT(same, n * 0.9) << "another seed must give another mask";
    }
    Buf a(*be, DType::F32, 4), b(*be, DType::F32, 4);
    EXPECT_THROW(be->dropout_forward(a.p(), b.p(), 4, 1.0f, 0, 0, DType::F32), InternalError);
}

TEST_P(DropoutTest, BiasDropoutAddForwardBackward) {
    const DType t = GetParam();
    auto be = cpu_backend();
    const std::int64_t shapes[][2] = {{3, 5}, {65, 130}, {9, 2049}, {1030, 1024}};
    for (auto& s : shapes) {
        const std::int64_t rows = s[0], cols = s[1], n = rows * cols;
        for (float p : {0.0f, 0.25f}) {
            for (bool with_bias : {true, false}) {
                SCOPED_TRACE(::testing::Message() << rows << "x" << cols << " p=" << p
                                                  << " bias=" << with_bias);
                auto x = rounded(t, random_vec(n, 81)), r = rounded(t, random_vec(n, 82));
                auto bias = rounded(t, random_vec(cols, 83));
                auto dout = rounded(t, random_vec(n, 84));
                const std::uint64_t seed = 7, offset = 1000;
                const std::uint32_t thr = dropout_threshold(p);
                std::vector<double> want(n), dx(n), db(cols, 0.0);
                for (std::int64_t i = 0; i < rows; ++i)
                    for (std::int64_t j = 0; j < cols; ++j) {
                        const std::int64_t e = i * cols + j;
                        const double m = dropout_keep(seed, offset + e, thr) ? 1.0 / (1.0 - p) : 0.0;
                        want[e] = r[e] + m * (x[e] + (with_bias ? bias[j] : 0.0));
                        dx[e] = m * dout[e];
                    }
                Buf bx(*be, t, x), br(*be, t, r), bb(*be, t, bias), bo(*be, t, n);
                be->bias_dropout_add(bx.p(), with_bias ? bb.p() : nullptr, br.p(), bo.p(), rows,
                                     cols, p, seed, offset, t);
                Tol tl = tol_for(t);
                tl.atol = std::max(tl.atol, 2 * tl.rtol);  // values are O(1)
                EXPECT_TRUE(all_close(bo.get(), want, tl));
                // out aliasing residual
                be->bias_dropout_add(bx.p(), with_bias ? bb.p() : nullptr, br.p(), br.p(), rows,
                                     cols, p, seed, offset, t);
                EXPECT_TRUE(all_close(br.get(), bo.get(), {0, 0}));

                Buf bd(*be, t, dout), bdx(*be, t, n), dbias(*be, DType::F32, cols);
                be->zero(dbias.p(), cols * sizeof(float));
                be->bias_dropout_add_backward(bd.p(), bdx.p(), dbias.f32(), rows, cols, p, seed,
                                              offset, t);
                EXPECT_TRUE(all_close(bdx.get(), dx, tl));
                auto stored = bdx.get();
                for (std::int64_t i = 0; i < rows; ++i)
                    for (std::int64_t j = 0; j < cols; ++j) db[j] += stored[i * cols + j];
                EXPECT_TRUE(all_close(dbias.get(), db, {1e-5, 1e-6 * rows}));
                // nullable dbias
                bdx.poison();
                be->bias_dropout_add_backward(bd.p(), bdx.p(), nullptr, rows, cols, p, seed,
                                              offset, t);
                EXPECT_TRUE(all_close(bdx.get(), stored, {0, 0}));
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Types, DropoutTest, ::testing::ValuesIn(kAllTypes),
                         [](const auto& info) { return dname(info.param); });

}  // namespace
}  // namespace gpt::test
