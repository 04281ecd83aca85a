// LayerNorm forward against fp64, backward against the analytic fp64 gradient (itself
// checked against finite differences of the fp64 forward), with += parameter gradients;
// LayerNorm's and RMSNorm's zero-centred gamma (--apply-layernorm-1p); rows picked out of a
// larger buffer by NormRows (--qk-layernorm).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend_test_util.hpp"

namespace gpt::test {
namespace {

struct LnRef {
    std::vector<double> y, mean, rstd, dx, dg, db;
};

LnRef ln_ref(const std::vector<double>& x, const std::vector<double>& g,
             const std::vector<double>& b, const std::vector<double>& dy, std::int64_t rows,
             std::int64_t cols, double eps) {
    LnRef r;
    r.y.resize(rows * cols);
    r.dx.resize(rows * cols);
    r.dg.assign(cols, 0.0);
    r.db.assign(cols, 0.0);
    for (std::int64_t i = 0; i < rows; ++i) {
        const double* xr = &x[i * cols];
        double mu = 0, var = 0;
        for (std::int64_t j = 0; j < cols; ++j) mu += xr[j];
        mu /= cols;
        for (std::int64_t j = 0; j < cols; ++j) var += (xr[j] - mu) * (xr[j] - mu);
        var /= cols;
        double rs = 1.0 / std::sqrt(var + eps);
        r.mean.push_back(mu);
        r.rstd.push_back(rs);
        double c1 = 0, c2 = 0;
        for (std::int64_t j = 0; j < cols; ++j) {
            double xh = (xr[j] - mu) * rs;
            r.y[i * cols + j] = xh * g[j] + b[j];
            double dyg = dy[i * cols + j] * g[j];
            c1 += dyg;
            c2 += dyg * xh;
            r.dg[j] += dy[i * cols + j] * xh;
            r.db[j] += dy[i * cols + j];
        }
        c1 /= cols;
        c2 /= cols;
        for (std::int64_t j = 0; j < cols; ++j) {
            double xh = (xr[j] - mu) * rs;
            r.dx[i * cols + j] = (dy[i * cols + j] * g[j] - c1 - xh * c2) * rs;
        }
    }
    return r;
}

TEST(LayerNormReference, GradientMatchesFiniteDifferences) {
    const std::int64_t rows = 3, cols = 7;
    auto x = random_vec(rows * cols, 1), g = random_vec(cols, 2), b = random_vec(cols, 3);
    auto dy = random_vec(rows * cols, 4);
    LnRef r = ln_ref(x, g, b, dy, rows, cols, 1e-5);
    auto loss = [&](const std::vector<double>& xx) {
        LnRef q = ln_ref(xx, g, b, dy, rows, cols, 1e-5);
        double s = 0;
        for (std::size_t i = 0; i < q.y.size(); ++i) s += q.y[i] * dy[i];
        return s;
    };
    for (std::size_t i = 0; i < x.size(); ++i) {
        auto xp = x, xm = x;
        xp[i] += 1e-6;
        xm[i] -= 1e-6;
        EXPECT_NEAR((loss(xp) - loss(xm)) / 2e-6, r.dx[i], 1e-6);
    }
}

class LayerNormTest : public ::testing::TestWithParam<DType> {};

TEST_P(LayerNormTest, ForwardAndBackward) {
    const DType t = GetParam();
    auto be = cpu_backend();
    const std::int64_t shapes[][2] = {{1, 1}, {5, 17}, {33, 256}, {40, 1030}, {1025, 1024}};
    for (auto& s : shapes) {
        const std::int64_t rows = s[0], cols = s[1];
        SCOPED_TRACE(::testing::Message() << rows << "x" << cols);
        auto x = rounded(t, random_vec(rows * cols, 21, -2.0, 3.0));
        auto g = rounded(t, random_vec(cols, 22, 0.5, 1.5));
        auto b = rounded(t, random_vec(cols, 23));
        auto dy = rounded(t, random_vec(rows * cols, 24));
        const float eps = 1e-5f;
        LnRef r = ln_ref(x, g, b, dy, rows, cols, eps);
        Buf bx(*be, t, x), bg(*be, t, g), bb(*be, t, b), by(*be, t, rows * cols);
        Buf mean(*be, DType::F32, rows), rstd(*be, DType::F32, rows);
        be->layernorm_forward(bx.p(), bg.p(), bb.p(), by.p(), mean.f32(), rstd.f32(), rows,
                              cols, eps, t);
        // Outputs are O(1): the tolerance is relative to that scale, not to each element.
        Tol tl = tol_for(t);
        tl.atol = std::max(tl.atol, tl.rtol) * 2;
        EXPECT_TRUE(all_close(by.get(), r.y, tl));
        EXPECT_TRUE(all_close(mean.get(), r.mean, {1e-5, 1e-6}));
        EXPECT_TRUE(all_close(rstd.get(), r.rstd, {1e-5, 1e-6}));

        // Backward; dgamma/dbeta start non-zero to check they accumulate.
        auto g0 = random_vec(cols, 25), b0 = random_vec(cols, 26);
        Buf ddx(*be, t, rows * cols), dg(*be, DType::F32, g0), db(*be, DType::F32, b0);
        Buf bdy(*be, t, dy);
        be->layernorm_backward(bdy.p(), bx.p(), bg.p(), mean.f32(), rstd.f32(), nullptr, ddx.p(),
                               dg.f32(), db.f32(), rows, cols, t);
        std::vector<double> wg(cols), wb(cols);
        for (std::int64_t j = 0; j < cols; ++j) {
            wg[j] = static_cast<float>(g0[j]) + r.dg[j];
            wb[j] = static_cast<float>(b0[j]) + r.db[j];
        }
        EXPECT_TRUE(all_close(ddx.get(), r.dx, tl));
        const double sum_scale = std::sqrt(static_cast<double>(rows));
        EXPECT_TRUE(all_close(dg.get(), wg, {1e-4, 1e-5 * sum_scale}));
        EXPECT_TRUE(all_close(db.get(), wb, {1e-4, 1e-5 * sum_scale}));

        // The residual path's gradient added in (dx = dLN + dres), into dres itself as the
        // model calls it, and into a separate buffer.
        auto dres = rounded(t, random_vec(rows * cols, 27, -4.0, 4.0));
        std::vector<double> want(dres.size());
        for (std::size_t i = 0; i < want.size(); ++i) want[i] = dres[i] + r.dx[i];
        Buf bres(*be, t, dres), dsum(*be, t, rows * cols);
        be->layernorm_backward(bdy.p(), bx.p(), bg.p(), mean.f32(), rstd.f32(), bres.p(), dsum.p(),
                               dg.f32(), db.f32(), rows, cols, t);
        EXPECT_TRUE(all_close(dsum.get(), want, tl));
        be->layernorm_backward(bdy.p(), bx.p(), bg.p(), mean.f32(), rstd.f32(), bres.p(), bres.p(),
                               dg.f32(), db.f32(), rows, cols, t);
        EXPECT_TRUE(all_close(bres.get(), dsum.get(), {0, 0}));

        // dx may alias dy.
        be->layernorm_backward(bdy.p(), bx.p(), bg.p(), mean.f32(), rstd.f32(), nullptr, bdy.p(),
                               dg.f32(), db.f32(), rows, cols, t);
        EXPECT_TRUE(all_close(bdy.get(), ddx.get(), {0, 0}));
    }
}

// --apply-layernorm-1p (zero-centred gamma): a norm scales by 1 + gamma, added in fp32.
// Gamma values k/64 (|k| <= 32) make 1 + gamma exact in every type, so the 1p norm of gamma
// must be the plain norm of 1 + gamma bit for bit: y, the statistics, dx with the residual's
// gradient added, and dgamma/dbeta (their formulas do not read gamma). LayerNorm and RMSNorm.
TEST_P(LayerNormTest, ZeroCenteredGammaIsThePlainNormOfOnePlusGamma) {
    const DType t = GetParam();
    auto be = cpu_backend();
    const std::int64_t rows = 9;
    for (const std::int64_t cols : {17, 256}) {
        for (const bool rms : {false, true}) {
            SCOPED_TRACE(::testing::Message() << (rms ? "RMSNorm" : "LayerNorm") << " cols " << cols);
            const auto n = static_cast<std::size_t>(rows * cols);
            const auto x = rounded(t, random_vec(n, 31, -2.0, 3.0));
            const auto dy = rounded(t, random_vec(n, 32));
            const auto dres = rounded(t, random_vec(n, 33));
            const auto b = rounded(t, random_vec(static_cast<std::size_t>(cols), 34));
            std::vector<double> w(static_cast<std::size_t>(cols)), one_plus(w.size());
            std::mt19937 gen(35);
            for (std::size_t j = 0; j < w.size(); ++j) {
                w[j] = static_cast<double>(static_cast<int>(gen() % 65) - 32) / 64.0;
                one_plus[j] = 1.0 + w[j];
            }
            struct Out {
                std::vector<double> y, mean, rstd, dx, dg, db;
            };
            auto run = [&](const std::vector<double>& g, bool zero_centered) {
                const std::vector<double> zeros(static_cast<std::size_t>(cols), 0.0);
                Buf bx(*be, t, x), bg(*be, t, g), bb(*be, t, b), by(*be, t, n), bdy(*be, t, dy), bres(*be, t, dres),
                    bdx(*be, t, n), mean(*be, DType::F32, std::vector<double>(rows, 0.0)),
                    rstd(*be, DType::F32, rows), dg(*be, DType::F32, zeros), db(*be, DType::F32, zeros);
                if (rms) {
                    be->rmsnorm_forward(bx.p(), bg.p(), by.p(), rstd.f32(), rows, cols, 1e-5f, t, zero_centered);
                    be->rmsnorm_backward(bdy.p(), bx.p(), bg.p(), rstd.f32(), bres.p(), bdx.p(), dg.f32(), rows, cols,
                                         t, zero_centered);
                } else {
                    be->layernorm_forward(bx.p(), bg.p(), bb.p(), by.p(), mean.f32(), rstd.f32(), rows, cols, 1e-5f,
                                          t, zero_centered);
                    be->layernorm_backward(bdy.p(), bx.p(), bg.p(), mean.f32(), rstd.f32(), bres.p(), bdx.p(),
                                           dg.f32(), db.f32(), rows, cols, t, zero_centered);
                }
                return Out{by.get(), mean.get(), rstd.get(), bdx.get(), dg.get(), db.get()};
            };
            const Out got = run(w, true), want = run(one_plus, false);
            EXPECT_EQ(got.y, want.y);
            EXPECT_EQ(got.mean, want.mean);
            EXPECT_EQ(got.rstd, want.rstd);
            EXPECT_EQ(got.dx, want.dx);
            EXPECT_EQ(got.dg, want.dg);
            EXPECT_EQ(got.db, want.db);
            // Not the plain norm of gamma itself: the forward and dx differ.
            const Out plain = run(w, false);
            EXPECT_NE(got.y, plain.y);
            EXPECT_NE(got.dx, plain.dx);
        }
    }
}

// NormRows (--qk-layernorm's query and key rows of the grouped QKV): the norm of the picked
// rows of a buffer is the plain norm of those rows gathered into a buffer of their own, bit
// for bit (y, statistics, dx with and without the residual's gradient, in place over dy,
// dgamma/dbeta), and every other row of y and dx is left as it was. LayerNorm and RMSNorm,
// the query rows (blocks of 3 of every 5) and the key rows (1 of every 5 at 3).
TEST_P(LayerNormTest, NormRowsNormaliseOnlyThePickedRows) {
    const DType t = GetParam();
    auto be = cpu_backend();
    const std::int64_t total = 7 * 2 * 5;  // 7 tokens x 2 groups x (3 queries + K + V)
    for (const NormRows at : {NormRows{3, 5, 0}, NormRows{1, 5, 3}}) {
        const std::int64_t rows = total / at.stride * at.block;
        for (const std::int64_t cols : {16, 40}) {
            for (const bool rms : {false, true}) {
                SCOPED_TRACE(::testing::Message() << (rms ? "RMSNorm" : "LayerNorm") << " block " << at.block
                                                  << " first " << at.first << " cols " << cols);
                const auto n = static_cast<std::size_t>(total * cols);
                const auto x = rounded(t, random_vec(n, 41, -2.0, 3.0));
                const auto dy = rounded(t, random_vec(n, 42));
                const auto dres = rounded(t, random_vec(n, 43));
                const auto sentinel = rounded(t, random_vec(n, 44));
                const auto g = rounded(t, random_vec(static_cast<std::size_t>(cols), 45, 0.5, 1.5));
                const auto b = rounded(t, random_vec(static_cast<std::size_t>(cols), 46));
                // The picked rows of v, in op-row order.
                auto pick = [&](const std::vector<double>& v) {
                    std::vector<double> out;
                    for (std::int64_t r = 0; r < rows; ++r)
                        out.insert(out.end(), v.begin() + at.at(r) * cols, v.begin() + (at.at(r) + 1) * cols);
                    return out;
                };
                struct Out {
                    std::vector<double> y, mean, rstd, dx, dx_res, dg, db;
                };
                // The norm of `m` rows of xs (y and dx start as the sentinel) with the map `map`.
                auto run = [&](const std::vector<double>& xs, const std::vector<double>& dys,
                               const std::vector<double>& res, const std::vector<double>& init, std::int64_t m,
                               const NormRows& map) {
                    const std::vector<double> zeros(static_cast<std::size_t>(cols), 0.0);
                    Buf bx(*be, t, xs), bg(*be, t, g), bb(*be, t, b), by(*be, t, init), bdy(*be, t, dys),
                        bres(*be, t, res), bdx(*be, t, init), mean(*be, DType::F32, std::vector<double>(m, 0.0)),
                        rstd(*be, DType::F32, m), dg(*be, DType::F32, zeros), db(*be, DType::F32, zeros);
                    if (rms) {
                        be->rmsnorm_forward(bx.p(), bg.p(), by.p(), rstd.f32(), m, cols, 1e-5f, t, false, map);
                        be->rmsnorm_backward(bdy.p(), bx.p(), bg.p(), rstd.f32(), bres.p(), bdx.p(), dg.f32(), m,
                                             cols, t, false, map);
                        be->rmsnorm_backward(bdy.p(), bx.p(), bg.p(), rstd.f32(), nullptr, bdy.p(), dg.f32(), m,
                                             cols, t, false, map);
                    } else {
                        be->layernorm_forward(bx.p(), bg.p(), bb.p(), by.p(), mean.f32(), rstd.f32(), m, cols,
                                              1e-5f, t, false, map);
                        be->layernorm_backward(bdy.p(), bx.p(), bg.p(), mean.f32(), rstd.f32(), bres.p(), bdx.p(),
                                               dg.f32(), db.f32(), m, cols, t, false, map);
                        be->layernorm_backward(bdy.p(), bx.p(), bg.p(), mean.f32(), rstd.f32(), nullptr, bdy.p(),
                                               dg.f32(), db.f32(), m, cols, t, false, map);
                    }
                    return Out{by.get(), mean.get(), rstd.get(), bdy.get(), bdx.get(), dg.get(), db.get()};
                };
                const Out got = run(x, dy, dres, sentinel, rows, at);
                const Out want = run(pick(x), pick(dy), pick(dres), pick(sentinel), rows, NormRows{});
                EXPECT_EQ(pick(got.y), want.y);
                EXPECT_EQ(got.mean, want.mean);
                EXPECT_EQ(got.rstd, want.rstd);
                EXPECT_EQ(pick(got.dx), want.dx);
                EXPECT_EQ(pick(got.dx_res), want.dx_res);
                EXPECT_EQ(got.dg, want.dg);
                EXPECT_EQ(got.db, want.db);
                // The rows not picked: y and dx as they were, dy (the in-place dx) untouched.
                for (std::int64_t r = 0; r < total; ++r) {
                    if (r % at.stride >= at.first && r % at.stride < at.first + at.block) continue;
                    for (std::int64_t j = 0; j < cols; ++j) {
                        const auto i = static_cast<std::size_t>(r * cols + j);
                        ASSERT_EQ(got.y[i], sentinel[i]) << "row " << r;
                        ASSERT_EQ(got.dx_res[i], sentinel[i]) << "row " << r;
                        ASSERT_EQ(got.dx[i], dy[i]) << "row " << r;
                    }
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Types, LayerNormTest, ::testing::ValuesIn(kAllTypes),
                         [](const auto& info) { return dname(info.param); });

}  // namespace
}  // namespace gpt::test
