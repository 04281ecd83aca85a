// CUDA backend vs CPU backend: layernorm, cross-entropy pieces, embeddings, AdamW,
// gradient statistics and sums.
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

TEST_F(CudaRows, CrossEntropyPieces) {
    const std::int64_t shapes[][2] = {{1, 1}, {7, 1000}, {33, 50304}};
    for (DType t : kAllTypes)
        for (auto& sh : shapes)
            for (std::int64_t vocab_start : {std::int64_t{0}, std::int64_t{500}}) {
                const std::int64_t rows = sh[0], v = sh[1];
                SCOPED_TRACE(dname(t) + " " + std::to_string(rows) + "x" + std::to_string(v) +
                             " start=" + std::to_string(vocab_start));
                Twin logits(cpu(), gpu(), t, random_vec(rows * v, 30, -8.0, 8.0));
                std::vector<std::int32_t> tv(rows);
                for (std::int64_t r = 0; r < rows; ++r)  // some in the shard, some outside
                    tv[r] = static_cast<std::int32_t>((r * 7919) % (v + vocab_start + 3));
                Ints targets(cpu(), gpu(), tv);
                Twin mx(cpu(), gpu(), DType::F32, rows), se(cpu(), gpu(), DType::F32, rows);
                Twin tl(cpu(), gpu(), DType::F32, rows), loss(cpu(), gpu(), DType::F32, rows);
                cpu().cross_entropy_max(logits.c(), mx.cf(), rows, v, t);
                gpu().cross_entropy_max(logits.g(), mx.gf(), rows, v, t);
                EXPECT_TRUE(mx.close(Tol{0, 0}));  // a max is exact
                cpu().cross_entropy_sums(logits.c(), targets.c(), mx.cf(), se.cf(), tl.cf(), rows, v, vocab_start, t);
                gpu().cross_entropy_sums(logits.g(), targets.g(), mx.gf(), se.gf(), tl.gf(), rows, v, vocab_start, t);
                EXPECT_TRUE(se.close(tol_for(DType::F32, 20.0)));
                EXPECT_TRUE(tl.close(Tol{0, 0}));
                cpu().cross_entropy_loss(mx.cf(), se.cf(), tl.cf(), loss.cf(), rows);
                gpu().cross_entropy_loss(mx.gf(), se.gf(), tl.gf(), loss.gf(), rows);
                EXPECT_TRUE(loss.close(tol_for(DType::F32, 20.0)));

                Twin lmx(cpu(), gpu(), DType::F32, rows), lse(cpu(), gpu(), DType::F32, rows);
                Twin ltl(cpu(), gpu(), DType::F32, rows);
                cpu().cross_entropy_stats(logits.c(), targets.c(), lmx.cf(), lse.cf(), ltl.cf(), rows, v, vocab_start, t);
                gpu().cross_entropy_stats(logits.g(), targets.g(), lmx.gf(), lse.gf(), ltl.gf(), rows, v, vocab_start, t);
                EXPECT_TRUE(lmx.close(Tol{0, 0}));
                EXPECT_TRUE(lse.close(tol_for(DType::F32, 20.0)));
                EXPECT_TRUE(ltl.close(Tol{0, 0}));

                Twin dloss(cpu(), gpu(), DType::F32, random_vec(rows, 31, 0.1, 1.0));
                Twin dlogits(cpu(), gpu(), t, rows * v);
                cpu().cross_entropy_backward(logits.c(), targets.c(), mx.cf(), se.cf(), dloss.cf(), dlogits.c(), rows, v, vocab_start, t);
                gpu().cross_entropy_backward(logits.g(), targets.g(), mx.gf(), se.gf(), dloss.gf(), dlogits.g(), rows, v, vocab_start, t);
                EXPECT_TRUE(dlogits.close(tol_for(t, 4.0)));
                // In place (dlogits aliases logits), as the model runs it.
                cpu().cross_entropy_backward(logits.c(), targets.c(), mx.cf(), se.cf(), dloss.cf(), logits.c(), rows, v, vocab_start, t);
                gpu().cross_entropy_backward(logits.g(), targets.g(), mx.gf(), se.gf(), dloss.gf(), logits.g(), rows, v, vocab_start, t);
                EXPECT_TRUE(logits.close(tol_for(t, 4.0)));
            }
}

TEST_F(CudaRows, Embeddings) {
    const std::int64_t b = 3, s = 17, h = 40, vocab = 50;
    std::vector<std::int32_t> tv(b * s);
    for (std::int64_t i = 0; i < b * s; ++i) tv[i] = static_cast<std::int32_t>((i * 13) % vocab);
    tv[5] = tv[6] = tv[7];  // repeated tokens accumulate into one row
    Ints tokens(cpu(), gpu(), tv);
    for (DType t : kAllTypes)
        for (auto [vs, ve] : {std::pair<std::int64_t, std::int64_t>{0, vocab}, {20, 35}}) {
            SCOPED_TRACE(dname(t) + " shard [" + std::to_string(vs) + "," + std::to_string(ve) + ")");
            Twin table(cpu(), gpu(), t, random_vec((ve - vs) * h, 40));
            Twin out(cpu(), gpu(), t, s * b * h);
            cpu().embedding_forward(tokens.c(), table.c(), out.c(), b, s, h, vs, ve, t);
            gpu().embedding_forward(tokens.g(), table.g(), out.g(), b, s, h, vs, ve, t);
            EXPECT_TRUE(out.close(Tol{0, 0}));  // a gather is exact

            const std::int64_t first = 4, max_pos = 32;
            Twin pos(cpu(), gpu(), t, random_vec(max_pos * h, 41));
            cpu().position_embedding_forward(pos.c(), out.c(), b, s, h, first, t);
            gpu().position_embedding_forward(pos.g(), out.g(), b, s, h, first, t);
            EXPECT_TRUE(out.close(tol_for(t)));

            Twin dout(cpu(), gpu(), t, random_vec(s * b * h, 42));
            Twin dtable(cpu(), gpu(), DType::F32, random_vec((ve - vs) * h, 43));
            cpu().embedding_backward(tokens.c(), dout.c(), dtable.cf(), b, s, h, vs, ve, t);
            gpu().embedding_backward(tokens.g(), dout.g(), dtable.gf(), b, s, h, vs, ve, t);
            EXPECT_TRUE(dtable.close(tol_for(DType::F32, 4.0)));
            Twin dpos(cpu(), gpu(), DType::F32, random_vec(max_pos * h, 44));
            cpu().position_embedding_backward(dout.c(), dpos.cf(), b, s, h, first, t);
            gpu().position_embedding_backward(dout.g(), dpos.gf(), b, s, h, first, t);
            EXPECT_TRUE(dpos.close(tol_for(DType::F32, 4.0)));
        }
}

TEST_F(CudaRows, AdamStep) {
    const std::int64_t n = 10007;
    for (DType mt : kAllTypes)
        for (std::int64_t step : {std::int64_t{1}, std::int64_t{1000}}) {
            SCOPED_TRACE("model " + dname(mt) + " step " + std::to_string(step));
            Twin p(cpu(), gpu(), DType::F32, random_vec(n, 50));
            Twin g(cpu(), gpu(), DType::F32, random_vec(n, 51, -100.0, 100.0));
            Twin m(cpu(), gpu(), DType::F32, random_vec(n, 52, -0.1, 0.1));
            Twin v(cpu(), gpu(), DType::F32, random_vec(n, 53, 0.0, 0.01));
            Twin model(cpu(), gpu(), mt, n);
            AdamArgs a;
            a.n = n;
            a.lr = 1e-3f;
            a.weight_decay = 0.1f;
            a.step = step;
            a.grad_scale = 1.0f / 64.0f;
            a.model_dtype = mt;
            auto run = [&](Backend& be, bool on_gpu) {
                a.main_param = on_gpu ? p.gf() : p.cf();
                a.grad = on_gpu ? g.gf() : g.cf();
                a.exp_avg = on_gpu ? m.gf() : m.cf();
                a.exp_avg_sq = on_gpu ? v.gf() : v.cf();
                a.model_param = on_gpu ? model.g() : model.c();
                be.adam_step(a);
            };
            run(cpu(), false);
            run(gpu(), true);
            EXPECT_TRUE(p.close(tol_for(DType::F32, 2.0)));
            EXPECT_TRUE(m.close(tol_for(DType::F32)));
            EXPECT_TRUE(v.close(tol_for(DType::F32)));
            EXPECT_TRUE(model.close(tol_for(mt, 2.0)));
        }
}

TEST_F(CudaRows, GradStatsAndSum) {
    for (std::int64_t n : {std::int64_t{1}, std::int64_t{999}, std::int64_t{3000001}}) {
        SCOPED_TRACE("n=" + std::to_string(n));
        // Loss-scaled magnitudes whose squares overflow fp32: the sum must stay finite.
        auto vals = random_vec(n, 60, -1e20, 1e20);
        Twin g(cpu(), gpu(), DType::F32, vals);
        GradStats c = cpu().grad_stats(g.cf(), n), d = gpu().grad_stats(g.gf(), n);
        EXPECT_TRUE(d.finite);
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
