// CUDA backend vs CPU backend, both against fp64 within derived error bounds
// (rows_bounds.hpp): cross-entropy pieces, embeddings and AdamW, and tests that the bounds
// reject what typical bugs compute.
#include <cmath>
#include <utility>

#include "cuda_test_util.hpp"
#include "rows_bounds.hpp"

namespace gpt::test {
namespace {

class CudaLosses : public CudaVsCpu {};

TEST_F(CudaLosses, CrossEntropyPieces) {
    const std::int64_t shapes[][2] = {{1, 1}, {7, 1000}, {33, 50304}};
    for (DType t : kAllTypes)
        for (auto& sh : shapes)
            for (std::int64_t vocab_start : {std::int64_t{0}, std::int64_t{500}}) {
                const std::int64_t rows = sh[0], v = sh[1];
                SCOPED_TRACE(dname(t) + " " + std::to_string(rows) + "x" + std::to_string(v) +
                             " start=" + std::to_string(vocab_start));
                const auto xv = rounded(t, random_vec(rows * v, 30, -8.0, 8.0));
                Twin logits(cpu(), gpu(), t, xv);
                std::vector<std::int32_t> tv(rows);
                for (std::int64_t r = 0; r < rows; ++r)  // some in the shard, some outside
                    tv[r] = static_cast<std::int32_t>((r * 7919) % (v + vocab_start + 3));
                Ints targets(cpu(), gpu(), tv);
                const CeExact x = cross_entropy_exact(xv, tv, rows, v, vocab_start);
                const std::vector<double> exact0(rows, 0.0);
                Twin mx(cpu(), gpu(), DType::F32, rows), se(cpu(), gpu(), DType::F32, rows);
                Twin tl(cpu(), gpu(), DType::F32, rows), loss(cpu(), gpu(), DType::F32, rows);
                cpu().cross_entropy_max(logits.c(), mx.cf(), rows, v, t);
                gpu().cross_entropy_max(logits.g(), mx.gf(), rows, v, t);
                for (const auto& got : {mx.gpu_vals(), mx.cpu_vals()})
                    EXPECT_TRUE(within_bound(got, x.max, exact0)) << "max (exact)";
                cpu().cross_entropy_sums(logits.c(), targets.c(), mx.cf(), se.cf(), tl.cf(), rows, v, vocab_start, t);
                gpu().cross_entropy_sums(logits.g(), targets.g(), mx.gf(), se.gf(), tl.gf(), rows, v, vocab_start, t);
                for (const auto& got : {se.gpu_vals(), se.cpu_vals()})
                    EXPECT_TRUE(within_bound(got, x.sum_exp, x.sum_exp_bound)) << "sum_exp";
                for (const auto& got : {tl.gpu_vals(), tl.cpu_vals()})
                    EXPECT_TRUE(within_bound(got, x.target, exact0)) << "target logit (exact)";
                cpu().cross_entropy_loss(mx.cf(), se.cf(), tl.cf(), loss.cf(), rows);
                gpu().cross_entropy_loss(mx.gf(), se.gf(), tl.gf(), loss.gf(), rows);
                for (const auto& got : {loss.gpu_vals(), loss.cpu_vals()})
                    EXPECT_TRUE(within_bound(got, x.loss, x.loss_bound)) << "loss";

                Twin lmx(cpu(), gpu(), DType::F32, rows), lse(cpu(), gpu(), DType::F32, rows);
                Twin ltl(cpu(), gpu(), DType::F32, rows);
                cpu().cross_entropy_stats(logits.c(), targets.c(), lmx.cf(), lse.cf(), ltl.cf(), rows, v, vocab_start, t);
                gpu().cross_entropy_stats(logits.g(), targets.g(), lmx.gf(), lse.gf(), ltl.gf(), rows, v, vocab_start, t);
                for (Twin* tw : {&lmx, &lse, &ltl})
                    for (const auto& got : {tw->gpu_vals(), tw->cpu_vals()}) {
                        const bool sum = tw == &lse;
                        EXPECT_TRUE(within_bound(got, sum ? x.sum_exp : tw == &lmx ? x.max : x.target,
                                                 sum ? x.stats_sum_bound : exact0)) << "stats";
                    }

                const auto dlv = rounded(DType::F32, random_vec(rows, 31, 0.1, 1.0));
                Twin dloss(cpu(), gpu(), DType::F32, dlv);
                Twin dlogits(cpu(), gpu(), t, rows * v);
                std::vector<double> dx, dx_bound;
                cross_entropy_backward_exact(xv, tv, x, x.sum_exp_bound, dlv, rows, v, vocab_start, t, dx, dx_bound);
                cpu().cross_entropy_backward(logits.c(), targets.c(), mx.cf(), se.cf(), dloss.cf(), dlogits.c(), rows, v, vocab_start, t);
                gpu().cross_entropy_backward(logits.g(), targets.g(), mx.gf(), se.gf(), dloss.gf(), dlogits.g(), rows, v, vocab_start, t);
                EXPECT_TRUE(within_bound(dlogits.gpu_vals(), dx, dx_bound)) << "GPU dlogits";
                EXPECT_TRUE(within_bound(dlogits.cpu_vals(), dx, dx_bound)) << "CPU dlogits";
                // In place (dlogits aliases logits), as the model runs it.
                cpu().cross_entropy_backward(logits.c(), targets.c(), mx.cf(), se.cf(), dloss.cf(), logits.c(), rows, v, vocab_start, t);
                gpu().cross_entropy_backward(logits.g(), targets.g(), mx.gf(), se.gf(), dloss.gf(), logits.g(), rows, v, vocab_start, t);
                EXPECT_TRUE(within_bound(logits.gpu_vals(), dx, dx_bound)) << "GPU dlogits in place";
                EXPECT_TRUE(within_bound(logits.cpu_vals(), dx, dx_bound)) << "CPU dlogits in place";
            }
}

// The cross-entropy bounds can fail: exp without the max subtracted, the target's
// neighbour as target, the loss without the max, dlogits without dloss or without the -1.
TEST_F(CudaLosses, CrossEntropyBoundsRejectWrongResults) {
    const std::int64_t rows = 7, v = 1000;
    for (DType t : kAllTypes) {
        SCOPED_TRACE(dname(t));
        const auto xv = rounded(t, random_vec(rows * v, 30, -8.0, 8.0));
        std::vector<std::int32_t> tv(rows);
        for (std::int64_t r = 0; r < rows; ++r) tv[r] = static_cast<std::int32_t>((r * 7919) % v);
        const CeExact x = cross_entropy_exact(xv, tv, rows, v, 0);
        std::vector<double> no_max(rows), wrong_target(rows), loss_no_max(rows);
        for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t j = 0; j < v; ++j) no_max[r] += std::exp(xv[r * v + j]);
            wrong_target[r] = xv[r * v + (tv[r] + 1) % v];
            loss_no_max[r] = std::log(x.sum_exp[r]) - x.target[r];
        }
        EXPECT_FALSE(within_bound(no_max, x.sum_exp, x.sum_exp_bound)) << "max not subtracted";
        EXPECT_FALSE(within_bound(wrong_target, x.target, std::vector<double>(rows, 0.0))) << "target off by one";
        EXPECT_FALSE(within_bound(loss_no_max, x.loss, x.loss_bound)) << "loss without the max";
        const auto dlv = rounded(DType::F32, random_vec(rows, 31, 0.1, 1.0));
        std::vector<double> dx, bound, dx1, b1;
        cross_entropy_backward_exact(xv, tv, x, x.sum_exp_bound, dlv, rows, v, 0, t, dx, bound);
        cross_entropy_backward_exact(xv, tv, x, x.sum_exp_bound, std::vector<double>(rows, 1.0), rows, v, 0, t, dx1, b1);
        EXPECT_FALSE(within_bound(dx1, dx, bound)) << "dloss not applied";
        std::vector<double> no_onehot = dx;
        for (std::int64_t r = 0; r < rows; ++r) no_onehot[r * v + tv[r]] += dlv[r];
        EXPECT_FALSE(within_bound(no_onehot, dx, bound)) << "one-hot not subtracted";
    }
}

// Embedding rows out[s, b, :] of tokens [b, s], exact (0 outside the shard).
std::vector<double> gather_exact(const std::vector<std::int32_t>& tv, const std::vector<double>& table,
                                 std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t vs, std::int64_t ve) {
    std::vector<double> out(s * b * h, 0.0);
    for (std::int64_t bi = 0; bi < b; ++bi)
        for (std::int64_t si = 0; si < s; ++si) {
            const std::int64_t tok = tv[bi * s + si];
            if (tok < vs || tok >= ve) continue;
            for (std::int64_t d = 0; d < h; ++d) out[(si * b + bi) * h + d] = table[(tok - vs) * h + d];
        }
    return out;
}

// dtable (fp32) += scatter of dout by token: the sum and its bound 2 (c+1) u sum|terms|.
void scatter_exact(const std::vector<std::int32_t>& tv, const std::vector<double>& dout,
                   const std::vector<double>& dt0, std::int64_t b, std::int64_t s, std::int64_t h,
                   std::int64_t vs, std::int64_t ve, std::vector<double>& d, std::vector<double>& bound) {
    const double u = unit_roundoff(DType::F32);
    d = dt0;
    std::vector<double> mag(dt0.size()), cnt(ve - vs, 0.0);
    for (std::size_t i = 0; i < dt0.size(); ++i) mag[i] = std::abs(dt0[i]);
    for (std::int64_t bi = 0; bi < b; ++bi)
        for (std::int64_t si = 0; si < s; ++si) {
            const std::int64_t tok = tv[bi * s + si];
            if (tok < vs || tok >= ve) continue;
            cnt[tok - vs] += 1.0;
            for (std::int64_t k = 0; k < h; ++k) {
                d[(tok - vs) * h + k] += dout[(si * b + bi) * h + k];
                mag[(tok - vs) * h + k] += std::abs(dout[(si * b + bi) * h + k]);
            }
        }
    bound.resize(d.size());
    for (std::size_t i = 0; i < d.size(); ++i) bound[i] = 2.0 * (cnt[i / h] + 1.0) * u * mag[i];
}

TEST_F(CudaLosses, Embeddings) {
    const std::int64_t b = 3, s = 17, h = 40, vocab = 50;
    const double u = unit_roundoff(DType::F32);
    std::vector<std::int32_t> tv(b * s);
    for (std::int64_t i = 0; i < b * s; ++i) tv[i] = static_cast<std::int32_t>((i * 13) % vocab);
    tv[5] = tv[6] = tv[7];  // repeated tokens accumulate into one row
    Ints tokens(cpu(), gpu(), tv);
    for (DType t : kAllTypes)
        for (auto [vs, ve] : {std::pair<std::int64_t, std::int64_t>{0, vocab}, {20, 35}}) {
            SCOPED_TRACE(dname(t) + " shard [" + std::to_string(vs) + "," + std::to_string(ve) + ")");
            const auto tab = rounded(t, random_vec((ve - vs) * h, 40));
            Twin table(cpu(), gpu(), t, tab);
            Twin out(cpu(), gpu(), t, s * b * h);
            cpu().embedding_forward(tokens.c(), table.c(), out.c(), b, s, h, vs, ve, t);
            gpu().embedding_forward(tokens.g(), table.g(), out.g(), b, s, h, vs, ve, t);
            std::vector<double> ex = gather_exact(tv, tab, b, s, h, vs, ve);
            const std::vector<double> zero(ex.size(), 0.0);
            EXPECT_TRUE(within_bound(out.gpu_vals(), ex, zero)) << "GPU gather (exact)";
            EXPECT_TRUE(within_bound(out.cpu_vals(), ex, zero)) << "CPU gather (exact)";

            const std::int64_t first = 4, max_pos = 32;
            const auto posv = rounded(t, random_vec(max_pos * h, 41));
            Twin pos(cpu(), gpu(), t, posv);
            cpu().position_embedding_forward(pos.c(), out.c(), b, s, h, first, t);
            gpu().position_embedding_forward(pos.g(), out.g(), b, s, h, first, t);
            std::vector<double> bound(ex.size());
            for (std::int64_t si = 0; si < s; ++si)
                for (std::int64_t k = 0; k < b * h; ++k) {
                    const std::int64_t i = si * b * h + k;
                    ex[i] += posv[(first + si) * h + k % h];
                    bound[i] = u * std::abs(ex[i]) + output_rounding(t, ex[i]);
                }
            EXPECT_TRUE(within_bound(out.gpu_vals(), ex, bound)) << "GPU + positions";
            EXPECT_TRUE(within_bound(out.cpu_vals(), ex, bound)) << "CPU + positions";

            const auto doutv = rounded(t, random_vec(s * b * h, 42));
            const auto dt0 = rounded(DType::F32, random_vec((ve - vs) * h, 43));
            Twin dout(cpu(), gpu(), t, doutv);
            Twin dtable(cpu(), gpu(), DType::F32, dt0);
            cpu().embedding_backward(tokens.c(), dout.c(), dtable.cf(), b, s, h, vs, ve, t);
            gpu().embedding_backward(tokens.g(), dout.g(), dtable.gf(), b, s, h, vs, ve, t);
            std::vector<double> dex, dbound;
            scatter_exact(tv, doutv, dt0, b, s, h, vs, ve, dex, dbound);
            EXPECT_TRUE(within_bound(dtable.gpu_vals(), dex, dbound)) << "GPU dtable";
            EXPECT_TRUE(within_bound(dtable.cpu_vals(), dex, dbound)) << "CPU dtable";
            // Position gradients: every position is "token" first + si of each of b rows.
            const auto dp0 = rounded(DType::F32, random_vec(max_pos * h, 44));
            Twin dpos(cpu(), gpu(), DType::F32, dp0);
            cpu().position_embedding_backward(dout.c(), dpos.cf(), b, s, h, first, t);
            gpu().position_embedding_backward(dout.g(), dpos.gf(), b, s, h, first, t);
            std::vector<std::int32_t> ptok(b * s);
            for (std::int64_t i = 0; i < b * s; ++i) ptok[i] = static_cast<std::int32_t>(first + i % s);
            scatter_exact(ptok, doutv, dp0, b, s, h, 0, max_pos, dex, dbound);
            EXPECT_TRUE(within_bound(dpos.gpu_vals(), dex, dbound)) << "GPU dpos";
            EXPECT_TRUE(within_bound(dpos.cpu_vals(), dex, dbound)) << "CPU dpos";
        }
}

// The embedding bounds can fail: the row of token-1, [b, s] order instead of [s, b],
// repeated tokens overwriting instead of accumulating.
TEST_F(CudaLosses, EmbeddingBoundsRejectWrongResults) {
    const std::int64_t b = 3, s = 17, h = 40, vocab = 50;
    std::vector<std::int32_t> tv(b * s), prev(b * s), transposed(b * s);
    for (std::int64_t i = 0; i < b * s; ++i) tv[i] = static_cast<std::int32_t>((i * 13) % vocab);
    tv[5] = tv[6] = tv[7];
    for (std::int64_t i = 0; i < b * s; ++i) prev[i] = (tv[i] + vocab - 1) % vocab;
    for (std::int64_t bi = 0; bi < b; ++bi)  // the tokens read as [s, b]
        for (std::int64_t si = 0; si < s; ++si) transposed[bi * s + si] = tv[si * b + bi];
    const auto tab = rounded(DType::BF16, random_vec(vocab * h, 40));
    const auto ex = gather_exact(tv, tab, b, s, h, 0, vocab);
    const std::vector<double> zero(ex.size(), 0.0);
    EXPECT_FALSE(within_bound(gather_exact(prev, tab, b, s, h, 0, vocab), ex, zero)) << "token - 1";
    EXPECT_FALSE(within_bound(gather_exact(transposed, tab, b, s, h, 0, vocab), ex, zero)) << "[b, s] order";
    const auto doutv = rounded(DType::BF16, random_vec(s * b * h, 42));
    const std::vector<double> dt0(vocab * h, 0.0);
    std::vector<double> dex, dbound;
    scatter_exact(tv, doutv, dt0, b, s, h, 0, vocab, dex, dbound);
    std::vector<double> last = dt0;  // last write wins
    for (std::int64_t bi = 0; bi < b; ++bi)
        for (std::int64_t si = 0; si < s; ++si)
            for (std::int64_t k = 0; k < h; ++k) last[tv[bi * s + si] * h + k] = doutv[(si * b + bi) * h + k];
    EXPECT_FALSE(within_bound(last, dex, dbound)) << "repeated tokens overwrite";
}

TEST_F(CudaLosses, AdamStep) {
    const std::int64_t n = 10007;
    for (DType mt : kAllTypes)
        for (std::int64_t step : {std::int64_t{1}, std::int64_t{1000}}) {
            SCOPED_TRACE("model " + dname(mt) + " step " + std::to_string(step));
            const auto pv = rounded(DType::F32, random_vec(n, 50)), gv = rounded(DType::F32, random_vec(n, 51, -100.0, 100.0));
            const auto mv = rounded(DType::F32, random_vec(n, 52, -0.1, 0.1)), vv = rounded(DType::F32, random_vec(n, 53, 0.0, 0.01));
            Twin p(cpu(), gpu(), DType::F32, pv), g(cpu(), gpu(), DType::F32, gv);
            Twin m(cpu(), gpu(), DType::F32, mv), v(cpu(), gpu(), DType::F32, vv);
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
            const AdamExact x = adam_exact(a, pv, gv, mv, vv);
            for (bool on_gpu : {true, false}) {
                SCOPED_TRACE(on_gpu ? "GPU" : "CPU");
                EXPECT_TRUE(within_bound(on_gpu ? p.gpu_vals() : p.cpu_vals(), x.p, x.p_bound)) << "param";
                EXPECT_TRUE(within_bound(on_gpu ? m.gpu_vals() : m.cpu_vals(), x.m, x.m_bound)) << "exp_avg";
                EXPECT_TRUE(within_bound(on_gpu ? v.gpu_vals() : v.cpu_vals(), x.v, x.v_bound)) << "exp_avg_sq";
                EXPECT_TRUE(within_bound(on_gpu ? model.gpu_vals() : model.cpu_vals(), x.model, x.model_bound)) << "model copy";
            }
        }
}

// The AdamW bounds can fail: no bias correction, lr off by 1%, no weight decay, beta2 for
// beta1 (what each of those bugs computes instead, at steps 1 and 1000).
TEST_F(CudaLosses, AdamBoundsRejectWrongResults) {
    const std::int64_t n = 1000;
    const auto pv = rounded(DType::F32, random_vec(n, 50)), gv = rounded(DType::F32, random_vec(n, 51, -100.0, 100.0));
    const auto mv = rounded(DType::F32, random_vec(n, 52, -0.1, 0.1)), vv = rounded(DType::F32, random_vec(n, 53, 0.0, 0.01));
    for (std::int64_t step : {std::int64_t{1}, std::int64_t{1000}}) {
        SCOPED_TRACE("step " + std::to_string(step));
        AdamArgs a;
        a.lr = 1e-3f;
        a.weight_decay = 0.1f;
        a.step = step;
        a.grad_scale = 1.0f / 64.0f;
        const AdamExact x = adam_exact(a, pv, gv, mv, vv);
        AdamArgs no_bc = a, lr = a, no_wd = a, swapped = a;
        no_bc.step = 100000;  // beta^step = 0: what skipping the bias correction computes
        lr.lr = 1.01e-3f;
        no_wd.weight_decay = 0.0f;
        swapped.beta1 = a.beta2;
        for (auto [w, what] : {std::pair{no_bc, "no bias correction"}, {lr, "lr 1% high"},
                               {no_wd, "no weight decay"}, {swapped, "beta2 as beta1"}}) {
            const AdamExact y = adam_exact(w, pv, gv, mv, vv);
            EXPECT_FALSE(within_bound(y.p, x.p, x.p_bound)) << what;
        }
    }
}

}  // namespace
}  // namespace gpt::test
