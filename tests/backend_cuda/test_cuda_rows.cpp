// CUDA backend vs CPU backend: layernorm, cross-entropy pieces, embeddings, AdamW,
// gradient statistics and sums.
#include <cmath>
#include <limits>

#include "cuda_test_util.hpp"

namespace gpt::test {
namespace {

class CudaRows : public CudaVsCpu {};

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
                auto xv = random_vec(rows * cols, 20, 2.0, 4.0);
                Twin x(cpu(), gpu(), t, xv);
                Twin gamma(cpu(), gpu(), t, random_vec(cols, 21, 0.5, 1.5));
                Twin beta(cpu(), gpu(), t, random_vec(cols, 22));
                Twin y(cpu(), gpu(), t, rows * cols);
                Twin mean(cpu(), gpu(), DType::F32, rows), rstd(cpu(), gpu(), DType::F32, rows);
                cpu().layernorm_forward(x.c(), gamma.c(), beta.c(), y.c(), mean.cf(), rstd.cf(), rows, cols, 1e-5f, t);
                gpu().layernorm_forward(x.g(), gamma.g(), beta.g(), y.g(), mean.gf(), rstd.gf(), rows, cols, 1e-5f, t);
                EXPECT_TRUE(y.close(tol_for(t, 2.0)));
                EXPECT_TRUE(mean.close(tol_for(DType::F32, 4.0)));
                EXPECT_TRUE(rstd.close(tol_for(DType::F32, 40.0)));

                Twin dy(cpu(), gpu(), t, random_vec(rows * cols, 23));
                Twin dx_own(cpu(), gpu(), t, rows * cols);
                Twin& dx = alias ? dy : dx_own;
                Twin dg(cpu(), gpu(), DType::F32, random_vec(cols, 24));
                Twin dbeta(cpu(), gpu(), DType::F32, random_vec(cols, 25));
                // Both sides use the CPU's statistics so the comparison is of backward only.
                gpu().copy_to_device(mean.g(), mean.c(), rows * 4);
                gpu().copy_to_device(rstd.g(), rstd.c(), rows * 4);
                cpu().layernorm_backward(dy.c(), x.c(), gamma.c(), mean.cf(), rstd.cf(), nullptr, dx.c(), dg.cf(), dbeta.cf(), rows, cols, t);
                gpu().layernorm_backward(dy.g(), x.g(), gamma.g(), mean.gf(), rstd.gf(), nullptr, dx.g(), dg.gf(), dbeta.gf(), rows, cols, t);
                EXPECT_TRUE(dx.close(tol_for(t, 20.0)));
                EXPECT_TRUE(dg.close(tol_for(DType::F32, 1.0 + rows / 4.0)));
                EXPECT_TRUE(dbeta.close(tol_for(DType::F32, 1.0 + rows / 4.0)));

                // With the residual gradient added, into that buffer (the model's call).
                Twin dres(cpu(), gpu(), t, random_vec(rows * cols, 26, -3.0, 3.0));
                cpu().layernorm_backward(dx.c(), x.c(), gamma.c(), mean.cf(), rstd.cf(), dres.c(), dres.c(), dg.cf(), dbeta.cf(), rows, cols, t);
                gpu().layernorm_backward(dx.g(), x.g(), gamma.g(), mean.gf(), rstd.gf(), dres.g(), dres.g(), dg.gf(), dbeta.gf(), rows, cols, t);
                EXPECT_TRUE(dres.close(tol_for(t, 20.0)));
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
