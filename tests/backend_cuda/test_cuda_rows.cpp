// CUDA backend vs CPU backend: layernorm, gradient statistics and sums (cross-entropy,
// embeddings and AdamW: test_cuda_losses.cpp).
#include <cmath>
#include <limits>

#include "cuda_test_util.hpp"

namespace gpt::test {
namespace {

class CudaRows : public CudaVsCpu {};

// LayerNorm's error bounds against fp64 from the same rounded inputs (u32 = 2^-24, u_out the
// output type's unit roundoff; sums in fp32 in any order err by at most 2 (terms) u32 times
// the sum of magnitudes, c = 2 as for the GEMM: Higham's gamma_n, and truncating adders):
//  forward, one row of n:
//   mean:  e_mu = 2 (n+1) u32 sum|x|/n (n additions and the division);
//   var:   two-pass from the computed mean: sum (x - mu^)^2 = n var + n (mu - mu^)^2, so
//          |dvar| <= 2 (n+3) u32 var + e_mu^2;
//   rstd:  r = (var + eps)^-1/2: half var's relative error, plus 4 u32 for rsqrtf and the
//          add: rho_r = |dvar| / (2 (var + eps)) + 4 u32;
//   y_j = (x_j - mu) r g_j + b_j: r |g_j| (|x_j - mu| (rho_r + 4 u32) + e_mu) + 2 u32 |b_j|,
//          plus rounding to the output type u_out |y_j|.
//  backward, with the given (fp32) mean and rstd as exact inputs, xh = (x - mean) rstd and
//  g = dy * gamma:
//   dx_j = r (g_j - mean(g) - xh_j mean(g xh)):
//     r (3 u32 |g_j| + 2 (n+1) u32 mean|g| + |xh_j| 2 (n+5) u32 mean|g xh|) + 4 u32 |dx_j|,
//     and with the residual added, + u32 |dres_j|; then u_out |result|;
//   dgamma_j += sum over rows of dy xh: 2 (rows+4) u32 (|dgamma0| + sum|dy xh|);
//   dbeta_j  += sum over rows of dy:    2 (rows+1) u32 (|dbeta0| + sum|dy|).
// A wrong result (a missing rstd, the mean of the wrong row, a transposed gamma) is off by
// O(|y|): LayerNormBoundsRejectWrongResults checks that the bounds see it.
struct LnForward {
    std::vector<double> y, y_bound, mean, mean_bound, rstd, rstd_bound;
};
LnForward exact_ln_forward(const std::vector<double>& x, const std::vector<double>& g,
                           const std::vector<double>& b, std::int64_t rows, std::int64_t n,
                           double eps, DType t) {
    const double u = unit_roundoff(DType::F32);
    LnForward r;
    for (std::int64_t i = 0; i < rows; ++i) {
        const double* xr = &x[i * n];
        double mu = 0.0, mag = 0.0;
        for (std::int64_t j = 0; j < n; ++j) {
            mu += xr[j];
            mag += std::abs(xr[j]);
        }
        mu /= n;
        const double e_mu = 2.0 * (n + 1) * u * mag / n;
        double var = 0.0;
        for (std::int64_t j = 0; j < n; ++j) var += (xr[j] - mu) * (xr[j] - mu);
        var /= n;
        const double dvar = 2.0 * (n + 3) * u * var + e_mu * e_mu;
        const double rs = 1.0 / std::sqrt(var + eps), rho = dvar / (2.0 * (var + eps)) + 4.0 * u;
        r.mean.push_back(mu);
        r.mean_bound.push_back(e_mu);
        r.rstd.push_back(rs);
        r.rstd_bound.push_back(rs * rho);
        for (std::int64_t j = 0; j < n; ++j) {
            const double y = (xr[j] - mu) * rs * g[j] + b[j];
            r.y.push_back(y);
            r.y_bound.push_back(output_rounding(t, y) +
                                rs * std::abs(g[j]) * (std::abs(xr[j] - mu) * (rho + 4.0 * u) + e_mu) +
                                2.0 * u * std::abs(b[j]));
        }
    }
    return r;
}

struct LnBackward {
    std::vector<double> dx, dx_bound, dg, dg_bound, db, db_bound;
};
// dres empty: no residual gradient.
LnBackward exact_ln_backward(const std::vector<double>& dy, const std::vector<double>& x,
                             const std::vector<double>& g, const std::vector<double>& mean,
                             const std::vector<double>& rstd, const std::vector<double>& dres,
                             const std::vector<double>& dg0, const std::vector<double>& db0,
                             std::int64_t rows, std::int64_t n, DType t) {
    const double u = unit_roundoff(DType::F32);
    LnBackward r;
    std::vector<double> sg(n, 0.0), sgm(n, 0.0), sb(n, 0.0), sbm(n, 0.0);
    for (std::int64_t i = 0; i < rows; ++i) {
        double mg = 0.0, mgm = 0.0, mgx = 0.0, mgxm = 0.0;
        std::vector<double> xh(n), gg(n);
        for (std::int64_t j = 0; j < n; ++j) {
            xh[j] = (x[i * n + j] - mean[i]) * rstd[i];
            gg[j] = dy[i * n + j] * g[j];
            mg += gg[j];
            mgm += std::abs(gg[j]);
            mgx += gg[j] * xh[j];
            mgxm += std::abs(gg[j] * xh[j]);
            sg[j] += dy[i * n + j] * xh[j];
            sgm[j] += std::abs(dy[i * n + j] * xh[j]);
            sb[j] += dy[i * n + j];
            sbm[j] += std::abs(dy[i * n + j]);
        }
        mg /= n;
        mgm /= n;
        mgx /= n;
        mgxm /= n;
        for (std::int64_t j = 0; j < n; ++j) {
            double d = rstd[i] * (gg[j] - mg - xh[j] * mgx);
            double e = rstd[i] * (3.0 * u * std::abs(gg[j]) + 2.0 * (n + 1) * u * mgm +
                                  std::abs(xh[j]) * 2.0 * (n + 5) * u * mgxm) + 4.0 * u * std::abs(d);
            if (!dres.empty()) {
                d += dres[i * n + j];
                e += u * std::abs(dres[i * n + j]);
            }
            r.dx.push_back(d);
            r.dx_bound.push_back(output_rounding(t, d) + e);
        }
    }
    for (std::int64_t j = 0; j < n; ++j) {
        r.dg.push_back(dg0[j] + sg[j]);
        r.dg_bound.push_back(2.0 * (rows + 4) * u * (std::abs(dg0[j]) + sgm[j]));
        r.db.push_back(db0[j] + sb[j]);
        r.db_bound.push_back(2.0 * (rows + 1) * u * (std::abs(db0[j]) + sbm[j]));
    }
    return r;
}

TEST_F(CudaRows, LayerNormForwardBackward) {
    // Rows of whole 16-byte packs take the vectorized kernels with 1 (1024, 1600, fp32
    // 2048: 2), 3 (5120) or 4 (7168) packs per thread; fp32 rows of 5120 and 7168 and the
    // odd widths take the element-wise ones.
    const std::int64_t shapes[][2] = {{1, 1}, {5, 33}, {130, 1024}, {9, 1600}, {40, 2048}, {64, 5120}, {20, 7168}};
    for (DType t : kAllTypes)
        for (auto& sh : shapes)
            for (bool alias : {false, true}) {
                const std::int64_t rows = sh[0], cols = sh[1];
                SCOPED_TRACE(dname(t) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                             (alias ? " dx=dy" : ""));
                // A large common offset checks the two-pass variance.
                const auto xv = rounded(t, random_vec(rows * cols, 20, 2.0, 4.0));
                const auto gv = rounded(t, random_vec(cols, 21, 0.5, 1.5));
                const auto bv = rounded(t, random_vec(cols, 22));
                Twin x(cpu(), gpu(), t, xv);
                Twin gamma(cpu(), gpu(), t, gv);
                Twin beta(cpu(), gpu(), t, bv);
                Twin y(cpu(), gpu(), t, rows * cols);
                Twin mean(cpu(), gpu(), DType::F32, rows), rstd(cpu(), gpu(), DType::F32, rows);
                cpu().layernorm_forward(x.c(), gamma.c(), beta.c(), y.c(), mean.cf(), rstd.cf(), rows, cols, 1e-5f, t);
                gpu().layernorm_forward(x.g(), gamma.g(), beta.g(), y.g(), mean.gf(), rstd.gf(), rows, cols, 1e-5f, t);
                const LnForward f = exact_ln_forward(xv, gv, bv, rows, cols, double(1e-5f), t);
                EXPECT_TRUE(within_bound(y.gpu_vals(), f.y, f.y_bound)) << "GPU y";
                EXPECT_TRUE(within_bound(y.cpu_vals(), f.y, f.y_bound)) << "CPU y";
                EXPECT_TRUE(within_bound(mean.gpu_vals(), f.mean, f.mean_bound)) << "GPU mean";
                EXPECT_TRUE(within_bound(rstd.gpu_vals(), f.rstd, f.rstd_bound)) << "GPU rstd";
                EXPECT_TRUE(within_bound(rstd.cpu_vals(), f.rstd, f.rstd_bound)) << "CPU rstd";

                const auto dyv = rounded(t, random_vec(rows * cols, 23));
                Twin dy(cpu(), gpu(), t, dyv);
                Twin dx_own(cpu(), gpu(), t, rows * cols);
                Twin& dx = alias ? dy : dx_own;
                const auto dg0 = rounded(DType::F32, random_vec(cols, 24));
                const auto db0 = rounded(DType::F32, random_vec(cols, 25));
                Twin dg(cpu(), gpu(), DType::F32, dg0);
                Twin dbeta(cpu(), gpu(), DType::F32, db0);
                // Both sides use the CPU's statistics so the comparison is of backward only.
                gpu().copy_to_device(mean.g(), mean.c(), rows * 4);
                gpu().copy_to_device(rstd.g(), rstd.c(), rows * 4);
                const auto mv = mean.cpu_vals(), rv = rstd.cpu_vals();
                cpu().layernorm_backward(dy.c(), x.c(), gamma.c(), mean.cf(), rstd.cf(), nullptr, dx.c(), dg.cf(), dbeta.cf(), rows, cols, t);
                gpu().layernorm_backward(dy.g(), x.g(), gamma.g(), mean.gf(), rstd.gf(), nullptr, dx.g(), dg.gf(), dbeta.gf(), rows, cols, t);
                const LnBackward bw = exact_ln_backward(dyv, xv, gv, mv, rv, {}, dg0, db0, rows, cols, t);
                EXPECT_TRUE(within_bound(dx.gpu_vals(), bw.dx, bw.dx_bound)) << "GPU dx";
                EXPECT_TRUE(within_bound(dx.cpu_vals(), bw.dx, bw.dx_bound)) << "CPU dx";
                EXPECT_TRUE(within_bound(dg.gpu_vals(), bw.dg, bw.dg_bound)) << "GPU dgamma";
                EXPECT_TRUE(within_bound(dg.cpu_vals(), bw.dg, bw.dg_bound)) << "CPU dgamma";
                EXPECT_TRUE(within_bound(dbeta.gpu_vals(), bw.db, bw.db_bound)) << "GPU dbeta";
                EXPECT_TRUE(within_bound(dbeta.cpu_vals(), bw.db, bw.db_bound)) << "CPU dbeta";

                // With the residual gradient added, into that buffer (the model's call); each
                // side's dy is its own dx from above.
                const auto dresv = rounded(t, random_vec(rows * cols, 26, -3.0, 3.0));
                Twin dres(cpu(), gpu(), t, dresv);
                const auto dy_gpu = dx.gpu_vals(), dg_gpu = dg.gpu_vals(), db_gpu = dbeta.gpu_vals();
                gpu().layernorm_backward(dx.g(), x.g(), gamma.g(), mean.gf(), rstd.gf(), dres.g(), dres.g(), dg.gf(), dbeta.gf(), rows, cols, t);
                const LnBackward br = exact_ln_backward(dy_gpu, xv, gv, mv, rv, dresv, dg_gpu, db_gpu, rows, cols, t);
                EXPECT_TRUE(within_bound(dres.gpu_vals(), br.dx, br.dx_bound)) << "GPU dx + dres";
            }
}

// --apply-layernorm-1p on the GPU: the kernels' 1 + gamma in fp32 makes the 1p norm of gamma
// the plain norm of 1 + gamma bit for bit where 1 + gamma is exact (gamma = k/64, |k| <= 32),
// as on the CPU backend (test_layernorm.cpp): y, statistics, dx with the residual's
// gradient, dgamma/dbeta. LayerNorm and RMSNorm; rows of 1024 (the vectorised kernels) and
// 17 (the element-wise ones).
TEST_F(CudaRows, ZeroCenteredGammaIsThePlainNormOfOnePlusGamma) {
    const std::int64_t rows = 6;
    for (DType t : kAllTypes)
        for (const std::int64_t cols : {17, 1024})
            for (const bool rms : {false, true}) {
                SCOPED_TRACE(dname(t) + (rms ? " RMSNorm" : " LayerNorm") + " cols " + std::to_string(cols));
                const auto n = static_cast<std::size_t>(rows * cols);
                std::vector<double> w(static_cast<std::size_t>(cols)), one_plus(w.size());
                for (std::size_t j = 0; j < w.size(); ++j) {
                    w[j] = static_cast<double>(static_cast<int>((j * 37 + 11) % 65) - 32) / 64.0;
                    one_plus[j] = 1.0 + w[j];
                }
                Twin x(cpu(), gpu(), t, rounded(t, random_vec(n, 40, -2.0, 3.0)));
                Twin dy(cpu(), gpu(), t, rounded(t, random_vec(n, 41)));
                Twin dres(cpu(), gpu(), t, rounded(t, random_vec(n, 42)));
                Twin beta(cpu(), gpu(), t, rounded(t, random_vec(static_cast<std::size_t>(cols), 43)));
                auto run = [&](const std::vector<double>& g, bool zero_centered) {
                    const std::vector<double> zeros(static_cast<std::size_t>(cols), 0.0);
                    Twin gamma(cpu(), gpu(), t, g), y(cpu(), gpu(), t, n), dx(cpu(), gpu(), t, n);
                    Twin mean(cpu(), gpu(), DType::F32, std::vector<double>(rows, 0.0)),
                        rstd(cpu(), gpu(), DType::F32, rows), dg(cpu(), gpu(), DType::F32, zeros),
                        db(cpu(), gpu(), DType::F32, zeros);
                    if (rms) {
                        gpu().rmsnorm_forward(x.g(), gamma.g(), y.g(), rstd.gf(), rows, cols, 1e-5f, t, zero_centered);
                        gpu().rmsnorm_backward(dy.g(), x.g(), gamma.g(), rstd.gf(), dres.g(), dx.g(), dg.gf(), rows,
                                               cols, t, zero_centered);
                    } else {
                        gpu().layernorm_forward(x.g(), gamma.g(), beta.g(), y.g(), mean.gf(), rstd.gf(), rows, cols,
                                                1e-5f, t, zero_centered);
                        gpu().layernorm_backward(dy.g(), x.g(), gamma.g(), mean.gf(), rstd.gf(), dres.g(), dx.g(),
                                                 dg.gf(), db.gf(), rows, cols, t, zero_centered);
                    }
                    return std::vector<std::vector<double>>{y.gpu_vals(),  mean.gpu_vals(), rstd.gpu_vals(),
                                                            dx.gpu_vals(), dg.gpu_vals(),   db.gpu_vals()};
                };
                const auto got = run(w, true), want = run(one_plus, false), plain = run(w, false);
                const char* names[] = {"y", "mean", "rstd", "dx", "dgamma", "dbeta"};
                for (std::size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k], want[k]) << names[k];
                EXPECT_NE(got[0], plain[0]) << "y is the plain norm of gamma";
                EXPECT_NE(got[3], plain[3]) << "dx is the plain norm's";
            }
}

// NormRows on the GPU (--qk-layernorm's query and key rows of the grouped QKV): the norm of
// the picked rows equals the GPU's own plain norm of those rows gathered, bit for bit (y,
// statistics, dx with the residual's gradient and in place over dy, dgamma/dbeta), and the
// other rows of y and dy stay as they were, as on the CPU backend (test_layernorm.cpp).
// LayerNorm and RMSNorm; rows of 64 (the vectorised kernels) and 17 (the element-wise ones).
TEST_F(CudaRows, NormRowsNormaliseOnlyThePickedRows) {
    const std::int64_t total = 6 * 2 * 5;  // 6 tokens x 2 groups x (3 queries + K + V)
    for (DType t : kAllTypes)
        for (const NormRows at : {NormRows{3, 5, 0}, NormRows{1, 5, 3}})
            for (const std::int64_t cols : {17, 64})
                for (const bool rms : {false, true}) {
                    SCOPED_TRACE(dname(t) + (rms ? " RMSNorm" : " LayerNorm") + " block " + std::to_string(at.block) +
                                 " cols " + std::to_string(cols));
                    const std::int64_t rows = total / at.stride * at.block;
                    const auto n = static_cast<std::size_t>(total * cols);
                    const auto xv = rounded(t, random_vec(n, 50, -2.0, 3.0)), dyv = rounded(t, random_vec(n, 51));
                    const auto resv = rounded(t, random_vec(n, 52)), sentinel = rounded(t, random_vec(n, 53));
                    const auto cn = static_cast<std::size_t>(cols);
                    Twin gamma(cpu(), gpu(), t, rounded(t, random_vec(cn, 54, 0.5, 1.5)));
                    Twin beta(cpu(), gpu(), t, rounded(t, random_vec(cn, 55)));
                    auto pick = [&](const std::vector<double>& v) {
                        std::vector<double> out;
                        for (std::int64_t r = 0; r < rows; ++r)
                            out.insert(out.end(), v.begin() + at.at(r) * cols, v.begin() + (at.at(r) + 1) * cols);
                        return out;
                    };
                    auto run = [&](const std::vector<double>& xs, const std::vector<double>& dys,
                                   const std::vector<double>& res, const std::vector<double>& init,
                                   const NormRows& map) {
                        const std::vector<double> zeros(cn, 0.0);
                        Twin x(cpu(), gpu(), t, xs), dy(cpu(), gpu(), t, dys), dres(cpu(), gpu(), t, res);
                        Twin y(cpu(), gpu(), t, init), dx(cpu(), gpu(), t, init);
                        Twin mean(cpu(), gpu(), DType::F32, std::vector<double>(rows, 0.0)),
                            rstd(cpu(), gpu(), DType::F32, rows), dg(cpu(), gpu(), DType::F32, zeros),
                            db(cpu(), gpu(), DType::F32, zeros);
                        if (rms) {
                            gpu().rmsnorm_forward(x.g(), gamma.g(), y.g(), rstd.gf(), rows, cols, 1e-5f, t, false, map);
                            gpu().rmsnorm_backward(dy.g(), x.g(), gamma.g(), rstd.gf(), dres.g(), dx.g(), dg.gf(), rows,
                                                   cols, t, false, map);
                            gpu().rmsnorm_backward(dy.g(), x.g(), gamma.g(), rstd.gf(), nullptr, dy.g(), dg.gf(), rows,
                                                   cols, t, false, map);
                        } else {
                            gpu().layernorm_forward(x.g(), gamma.g(), beta.g(), y.g(), mean.gf(), rstd.gf(), rows, cols,
                                                    1e-5f, t, false, map);
                            gpu().layernorm_backward(dy.g(), x.g(), gamma.g(), mean.gf(), rstd.gf(), dres.g(), dx.g(),
                                                     dg.gf(), db.gf(), rows, cols, t, false, map);
                            gpu().layernorm_backward(dy.g(), x.g(), gamma.g(), mean.gf(), rstd.gf(), nullptr, dy.g(),
                                                     dg.gf(), db.gf(), rows, cols, t, false, map);
                        }
                        return std::vector<std::vector<double>>{y.gpu_vals(),  mean.gpu_vals(), rstd.gpu_vals(),
                                                                dx.gpu_vals(), dy.gpu_vals(),   dg.gpu_vals(),
                                                                db.gpu_vals()};
                    };
                    const auto got = run(xv, dyv, resv, sentinel, at);
                    const auto want = run(pick(xv), pick(dyv), pick(resv), pick(sentinel), NormRows{});
                    EXPECT_EQ(pick(got[0]), want[0]) << "y";
                    EXPECT_EQ(got[1], want[1]) << "mean";
                    EXPECT_EQ(got[2], want[2]) << "rstd";
                    EXPECT_EQ(pick(got[3]), want[3]) << "dx + dres";
                    EXPECT_EQ(pick(got[4]), want[4]) << "dx in place";
                    EXPECT_EQ(got[5], want[5]) << "dgamma";
                    EXPECT_EQ(got[6], want[6]) << "dbeta";
                    for (std::int64_t r = 0; r < total; ++r) {
                        if (r % at.stride >= at.first && r % at.stride < at.first + at.block) continue;
                        for (std::int64_t j = 0; j < cols; ++j) {
                            const auto i = static_cast<std::size_t>(r * cols + j);
                            ASSERT_EQ(got[0][i], sentinel[i]) << "y row " << r;
                            ASSERT_EQ(got[3][i], sentinel[i]) << "dx row " << r;
                            ASSERT_EQ(got[4][i], dyv[i]) << "dy row " << r;
                        }
                    }
                }
}

// The layernorm bounds can fail: a missing rstd, statistics of the neighbouring row and a
// reversed gamma are far outside them, in every type.
TEST_F(CudaRows, LayerNormBoundsRejectWrongResults) {
    const std::int64_t rows = 8, cols = 1024;
    for (DType t : kAllTypes) {
        SCOPED_TRACE(dname(t));
        const auto xv = rounded(t, random_vec(rows * cols, 20, 2.0, 4.0));
        const auto gv = rounded(t, random_vec(cols, 21, 0.5, 1.5));
        const auto bv = rounded(t, random_vec(cols, 22));
        Twin x(cpu(), gpu(), t, xv), gamma(cpu(), gpu(), t, gv), beta(cpu(), gpu(), t, bv);
        Twin y(cpu(), gpu(), t, rows * cols), mean(cpu(), gpu(), DType::F32, rows), rstd(cpu(), gpu(), DType::F32, rows);
        gpu().layernorm_forward(x.g(), gamma.g(), beta.g(), y.g(), mean.gf(), rstd.gf(), rows, cols, 1e-5f, t);
        const LnForward f = exact_ln_forward(xv, gv, bv, rows, cols, double(1e-5f), t);
        const auto got = y.gpu_vals();
        ASSERT_TRUE(within_bound(got, f.y, f.y_bound));
        std::vector<double> no_rstd(got.size()), shifted(got.size()), reversed(got.size());
        for (std::int64_t i = 0; i < rows; ++i)
            for (std::int64_t j = 0; j < cols; ++j) {
                const std::int64_t k = i * cols + j;
                no_rstd[k] = (xv[k] - f.mean[i]) * gv[j] + bv[j];
                shifted[k] = (xv[k] - f.mean[(i + 1) % rows]) * f.rstd[(i + 1) % rows] * gv[j] + bv[j];
                reversed[k] = (xv[k] - f.mean[i]) * f.rstd[i] * gv[cols - 1 - j] + bv[j];
            }
        EXPECT_FALSE(within_bound(no_rstd, f.y, f.y_bound)) << "missing rstd";
        EXPECT_FALSE(within_bound(shifted, f.y, f.y_bound)) << "statistics of the next row";
        EXPECT_FALSE(within_bound(reversed, f.y, f.y_bound)) << "gamma reversed";
    }
}

TEST_F(CudaRows, GradStatsAndSum) {
    for (std::int64_t n : {std::int64_t{1}, std::int64_t{999}, std::int64_t{3000001}}) {
        SCOPED_TRACE("n=" + std::to_string(n));
        // Loss-scaled magnitudes whose squares overflow fp32: the sum must stay finite.
        auto vals = random_vec(n, 60, -1e20, 1e20);
        for (std::int64_t i = 0; i < n; i += 5) vals[i] = i % 2 ? -0.0 : 0.0;  // zeros to count, spread over blocks
        Twin g(cpu(), gpu(), DType::F32, vals);
        GradStats c = cpu().grad_stats(g.cf(), n), d = gpu().grad_stats(g.gf(), n);
        EXPECT_TRUE(d.finite);
        EXPECT_EQ(d.zeros, (n + 4) / 5);
        EXPECT_EQ(d.zeros, c.zeros);
        EXPECT_NEAR(d.sum_squares, c.sum_squares, 1e-9 * c.sum_squares);
        EXPECT_NEAR(gpu().sum(g.gf(), n), cpu().sum(g.cf(), n), 1e-9 * std::sqrt(c.sum_squares) * n);
        for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
            vals[n / 2] = bad;
            g.set(vals);
            EXPECT_FALSE(gpu().grad_stats(g.gf(), n).finite);
        }
    }
    EXPECT_TRUE(gpu().grad_stats(nullptr, 0).finite);
}

}  // namespace
}  // namespace gpt::test
