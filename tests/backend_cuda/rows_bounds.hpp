// Error bounds for cross-entropy, embeddings and AdamW (issue 18): fp64 from the same
// rounded inputs and a bound per element from the operations each kernel performs in fp32.
// u = 2^-24; a sum of n terms in fp32 in any order errs by at most 2 (n + c) u sum|terms|
// (Higham's gamma_n, doubled as for the GEMM bound); exp/log in fp32 (expf, __expf, our
// fast_exp, logf) err by at most 8 ulps = 16 u relative (exp) or 16 u (1 + |result|) (log).
//
// Cross-entropy, one row of v logits x_j (fp16/bf16 widen to fp32 exactly), m = max x:
//  max:         exact (a comparison);
//  sum_exp:     sum_j w_j, w_j = exp(x_j - m): each w_j off by (2 u |x_j - m| + 16 u) w_j
//               (the rounded argument, exp), the sum 2 (v+1) u sum w: E_se;
//               the online form (stats) rescales partial sums by exp(m_old - m_new) once per
//               chunk of at most v elements: + 2 (4 u max|x| + 16 u) sum w (two rescales
//               of any element at most: per thread, then across threads);
//  target:      exact (a copy, or 0 outside the shard);
//  loss = log(se) + m - t: E_se / se + 16 u (1 + |log se|) + 4 u (|log se| + |m| + |t|);
//  dlogits_j = dloss (w_j / se - [j = target]):
//               dloss (p_j (2 u |x_j - m| + 16 u + E_se / se + 3 u) + 2 u |p_j - 1_t|)
//               + rounding to the logits' type.
// Embeddings: the gather is exact; the position add is one fp32 add, u |sum|, then rounded
// to the type; the fp32 gradient tables add c rows into the old value: 2 (c+1) u sum|terms|.
// AdamW, per element, with the fp32 hyper-parameters exactly as passed (1 - beta is exact
// in fp32 for beta in [1/2, 1]), g = grad gs, m' = b1 m + (1-b1) g, v' = b2 v + (1-b2) g^2,
// q = sqrt(v') / sqrt(bc2) + eps, p' = p (1 - lr wd) - (lr / bc1) m' / q:
//  m': 6 u (b1 |m| + (1-b1) |g|)  (three roundings per term: the grad scale, the products, the add);
//  v': 10 u (b2 v + (1-b2) g^2)   (five: the scale, squaring, the product, the add);
//  q:  sqrt(v'/bc2) (E_v / (2 v') + 4 u) + u q  (sqrt, fp32 1/sqrt(bc2), the product, + eps);
//  update = step m'/q: step (E_m / q + |m'| E_q / q^2 + 3 u |m'| / q)  (step_size and 1 - lr wd
//          rounded to fp32, the product, the divide);
//  p': 3 u |p| + E_update + u |p'|, and the model copy + its rounding to the model type.
// Wrong results (a shifted target, exp without the max subtracted, a missing dloss, an
// off-by-one token row, a missing bias correction, a wrong lr) are off by O(|result|):
// each ...BoundsRejectWrongResults test checks that these bounds see them.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "cuda_test_util.hpp"

namespace gpt::test {

struct CeExact {
    std::vector<double> max, sum_exp, sum_exp_bound, stats_sum_bound, target, loss, loss_bound;
};

// The forward pieces of every row; target outside [vocab_start, vocab_start + v): 0.
inline CeExact cross_entropy_exact(const std::vector<double>& x, const std::vector<std::int32_t>& tg,
                                   std::int64_t rows, std::int64_t v, std::int64_t vocab_start) {
    const double u = unit_roundoff(DType::F32);
    CeExact r;
    for (std::int64_t i = 0; i < rows; ++i) {
        const double* xr = &x[i * v];
        const double m = *std::max_element(xr, xr + v);
        double se = 0.0, arg = 0.0, maxabs = 0.0;
        for (std::int64_t j = 0; j < v; ++j) {
            const double w = std::exp(xr[j] - m);
            se += w;
            arg += w * (2.0 * u * std::abs(xr[j] - m) + 16.0 * u);
            maxabs = std::max(maxabs, std::abs(xr[j]));
        }
        const double e_se = arg + 2.0 * (v + 1) * u * se;
        const std::int64_t local = tg[i] - vocab_start;
        const double t = local >= 0 && local < v ? xr[local] : 0.0;
        const double l = std::log(se) + m - t;
        r.max.push_back(m);
        r.sum_exp.push_back(se);
        r.sum_exp_bound.push_back(e_se);
        r.stats_sum_bound.push_back(e_se + 2.0 * (4.0 * u * maxabs + 16.0 * u) * se);
        r.target.push_back(t);
        r.loss.push_back(l);
        r.loss_bound.push_back(e_se / se + 16.0 * u * (1.0 + std::abs(std::log(se))) +
                               4.0 * u * (std::abs(std::log(se)) + std::abs(m) + std::abs(t)));
    }
    return r;
}

// dlogits from the exact max and sum_exp; e_se the bound on the sum_exp the kernel was given.
inline void cross_entropy_backward_exact(const std::vector<double>& x, const std::vector<std::int32_t>& tg,
                                         const CeExact& f, const std::vector<double>& e_se,
                                         const std::vector<double>& dloss, std::int64_t rows,
                                         std::int64_t v, std::int64_t vocab_start, DType t,
                                         std::vector<double>& d, std::vector<double>& bound) {
    const double u = unit_roundoff(DType::F32);
    d.assign(rows * v, 0.0);
    bound.assign(rows * v, 0.0);
    for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < v; ++j) {
            const double p = std::exp(x[i * v + j] - f.max[i]) / f.sum_exp[i];
            const double oh = tg[i] - vocab_start == j ? 1.0 : 0.0;
            const double val = dloss[i] * (p - oh);
            d[i * v + j] = val;
            bound[i * v + j] =
                dloss[i] * (p * (2.0 * u * std::abs(x[i * v + j] - f.max[i]) + 16.0 * u + e_se[i] / f.sum_exp[i] + 3.0 * u) +
                            2.0 * u * std::abs(p - oh)) +
                output_rounding(t, val);
        }
}

struct AdamExact {
    std::vector<double> p, p_bound, m, m_bound, v, v_bound, model, model_bound;
};

// One AdamW step on fp64 copies of the fp32 state, with the arguments' fp32 values.
inline AdamExact adam_exact(const AdamArgs& a, const std::vector<double>& p, const std::vector<double>& g,
                            const std::vector<double>& m, const std::vector<double>& v) {
    const double u = unit_roundoff(DType::F32);
    const double b1 = a.beta1, b2 = a.beta2, eps = a.eps, gs = a.grad_scale;
    const double bc1 = 1.0 - std::pow(b1, static_cast<double>(a.step));
    const double bc2 = 1.0 - std::pow(b2, static_cast<double>(a.step));
    const double lr = a.lr, step = lr / bc1, decay = 1.0 - lr * static_cast<double>(a.weight_decay);
    AdamExact r;
    for (std::size_t i = 0; i < p.size(); ++i) {
        const double gi = g[i] * gs;
        const double mi = b1 * m[i] + (1.0 - b1) * gi;
        const double vi = b2 * v[i] + (1.0 - b2) * gi * gi;
        const double em = 6.0 * u * (b1 * std::abs(m[i]) + (1.0 - b1) * std::abs(gi));
        const double ev = 10.0 * u * (b2 * v[i] + (1.0 - b2) * gi * gi);
        const double root = std::sqrt(vi / bc2), q = root + eps;
        const double eq = (vi > 0.0 ? root * (ev / (2.0 * vi) + 4.0 * u) : std::sqrt(ev / bc2)) + u * q;
        const double upd = step * mi / q;
        const double eupd = step * (em / q + std::abs(mi) * eq / (q * q) + 3.0 * u * std::abs(mi) / q);
        const double pi = p[i] * decay - upd;
        const double ep = 3.0 * u * std::abs(p[i]) + eupd + u * std::abs(pi);
        r.p.push_back(pi);
        r.p_bound.push_back(ep);
        r.m.push_back(mi);
        r.m_bound.push_back(em);
        r.v.push_back(vi);
        r.v_bound.push_back(ev);
        r.model.push_back(pi);
        r.model_bound.push_back(ep + output_rounding(a.model_dtype, pi));
    }
    return r;
}

}  // namespace gpt::test
