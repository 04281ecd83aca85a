// Error bounds for causal attention (issue 18): the fp64 result from the same rounded
// inputs and, element by element, a bound on what any of our kernels (CPU plain/flash,
// CUDA plain through cuBLASLt, CUDA flash on CUDA cores or tensor cores) may differ from it.
//
// Notation: u = 2^-24 (fp32 unit roundoff), u_t the activation type's; sums of n terms in
// fp32 in any order err by at most 2 (n + c) u sum|terms| (Higham's gamma_n, doubled for
// truncating tensor-core adders, c the operations on the result), as for the GEMM bound.
// Per row i of a (batch, head) pair, keys j <= i (n = i + 1 of them), scale the fp32 scale:
//  scores    s_j = scale q.k_j:           Es_j = 2 (hn+2) u scale sum|q k_j| + 2 u |s_j|
//            (the scale applied to q, to the product or folded into scale*log2(e));
//  exp       w_j = exp(s_j - m), m = max s: relative error rho_j = Es_j + Es_m
//            + 2 u (|s_j| + |m|) (the rounded argument) + e_exp, e_exp = 16 u (8 ulps
//            covers expf, exp2f, ex2.approx and the CPU's fast_exp); the online softmax
//            rescales by exp(m_old - m_new) once per key tile (T = ceil(n/32) tiles), each
//            with the same kind of error: R = max_j rho_j + T (2 max Es + 4 u max|s| + e_exp);
//  softmax   p_j = w_j / sum w: |dp_j| <= eps p_j, eps = 2 R + 2 (n+2) u (the sum, the divide);
//  lse       m + log(sum w): R + 2 (n+2) u + 16 u (1 + |log sum w|) + 2 u |lse|;
//  out_d   = sum_j p_j mu_j v_jd (mu the dropout multiplier): sum_j mu_j p_j |v_jd| (eps + 2 u)
//            + rounding p mu to the GEMM type + 2 (n+1) u sum_j mu_j p_j |v_jd| + u_t |out_d|.
// Backward, g_j = mu_j dout.v_j, D = sum_j p_j g_j (= dout.out: flash computes it from the
// stored, rounded out), dS_j = p_j (g_j - D):
//  g_j:  mu_j 2 (hn+1) u sum|dout v_j| + 2 u |g_j|;
//  p_j as backward sees it (saved, or recomputed as exp(s_j - lse)):
//        epsP_j = eps + Es_j + 2 u (|s_j| + |lse|) + E_lse + e_exp;
//  D:    plain sum_j (epsP_j p_j |g_j| + p_j Eg_j) + 2 (n+2) u sum p_j |g_j|;
//        flash sum_d |dout_d| Eout_d + 2 (hn+1) u sum |dout_d| (|out_d| + Eout_d); the larger;
//  dS_j: epsP_j p_j |g_j - D| + p_j (Eg_j + E_D) + 3 u |dS_j| + rounding to the GEMM type;
//  dq_d  = scale sum_j dS_j k_jd:    scale sum_j EdS_j |k_jd| + 2 (n+2) u scale sum|dS_j k_jd|;
//  dk_jd = scale sum_i dS_ij q_id:   the same over the rows i >= j (s - j of them);
//  dv_jd = sum_i p_ij mu_ij dout_id: sum_i mu (epsP + 2 u) p |dout| + rounding pd to the GEMM
//          type + 2 (s+1) u sum mu p |dout|; each then + u_t |result|.
// Grouped K/V (heads_per_group = r > 1): a group's dk/dv is the sum of its r heads' sums,
// added in head order: the per-head error terms add, the sum is of r (s - j) terms plus one
// add per head (2 (r (s - j + 2)) u over the summed magnitudes), and a kernel that rounds
// the running sum to the activation type between heads (the plain CUDA path's beta = 1
// GEMMs) adds up to (r - 1) u_t of the summed magnitudes.
// Document masking (doc_start): row i sees keys [doc_start_i, i]; the sums run over those,
// masked probabilities are exactly 0, and the error terms keep n = i + 1 (an upper bound:
// the kernels visit at most that many keys and tiles).
// These are first-order bounds; the products of two relative errors (each below 1/8, which
// the reference asserts) add at most 1/8 of them, so every bound is multiplied by 9/8.
// A wrong result (a missing scale, the causal mask off by one, a missing rowsum term in
// dS, the dropout mask ignored) moves elements by O(|result|): CudaAttention's
// BoundsRejectWrongResults test checks that these bounds see it.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/dropout_mask.hpp"
#include "cuda_test_util.hpp"

namespace gpt::test {

struct AttnExact {
    std::vector<double> out, out_bound;      // [s, b, np, hn]
    std::vector<double> probs, probs_bound;  // [pairs, s, s] (plain's saved)
    std::vector<double> lse, lse_bound;      // [pairs, s] (flash's saved)
    std::vector<double> dqkv, dqkv_bound;    // [s, b, np/r, r + 2, hn] (r heads per group)
};

// Elements of the grouped qkv of a call.
inline std::int64_t attention_qkv_elems(const AttentionArgs& a) {
    return a.s * a.b * (a.np + 2 * a.np / a.heads_per_group) * a.hn;
}

// What a wrong kernel would compute instead, for the rejection test.
struct AttnFault {
    bool no_scale = false;       // scores without the 1/sqrt(hn)
    bool skip_diagonal = false;  // the causal mask off by one (row i sees keys < i only)
    bool no_rowsum = false;      // dS = p g, the softmax backward's D term missing
    bool no_dropout = false;     // the dropout multipliers ignored
    bool kv_of_head = false;     // grouped: head h reads K/V group h % groups, not h / r
    bool first_head_dkv = false; // grouped: a group's dK/dV from its first head only
};

// doc_start: the host copy of AttentionArgs::doc_start ([b, s]), empty for plain causal.
inline AttnExact attention_exact(const AttentionArgs& a, const std::vector<double>& qkv,
                                 const std::vector<double>& dout, AttnFault f = {},
                                 const std::vector<std::int32_t>& doc_start = {}) {
    const std::int64_t s = a.s, hn = a.hn, pairs = a.b * a.np, ldo = pairs * hn;
    const std::int64_t qpg = a.heads_per_group, kvp = pairs / qpg, ldq = kvp * (qpg + 2) * hn;
    auto q_at = [&](std::int64_t pr) { return pr / qpg * (qpg + 2) * hn + pr % qpg * hn; };
    auto k_at = [&](std::int64_t pr) {
        const std::int64_t g = f.kv_of_head ? (pr / a.np) * (a.np / qpg) + pr % (a.np / qpg) : pr / qpg;
        return g * (qpg + 2) * hn + qpg * hn;
    };
    std::vector<double> mag(static_cast<std::size_t>(s * ldq), 0.0);  // grouped dk/dv magnitudes
    const double u = unit_roundoff(DType::F32), e_exp = 16.0 * u;
    const DType t = a.dtype;
    const double scale = f.no_scale ? 1.0
                                    : static_cast<double>(a.softmax_scale != 0.0f
                                                              ? a.softmax_scale
                                                              : 1.0f / std::sqrt(static_cast<float>(hn)));
    const bool drop = a.dropout > 0.0f && !f.no_dropout;
    const std::uint32_t thr = dropout_threshold(a.dropout);
    const float keep = a.dropout > 0.0f ? 1.0f / (1.0f - a.dropout) : 1.0f;
    AttnExact r;
    r.out.assign(s * ldo, 0.0);
    r.out_bound.assign(s * ldo, 0.0);
    r.probs.assign(pairs * s * s, 0.0);
    r.probs_bound.assign(pairs * s * s, 0.0);
    r.lse.assign(pairs * s, 0.0);
    r.lse_bound.assign(pairs * s, 0.0);
    r.dqkv.assign(s * ldq, 0.0);
    r.dqkv_bound.assign(s * ldq, 0.0);
    double worst_rel = 0.0;
    // Rounding x to the GEMM type where the kernels convert it (fp32: already fp32).
    auto to_gemm = [&](double x) { return t == DType::F32 ? 0.0 : output_rounding(t, x); };
    for (std::int64_t pr = 0; pr < pairs; ++pr) {
        auto Q = [&](std::int64_t i, std::int64_t d) { return qkv[i * ldq + q_at(pr) + d]; };
        auto K = [&](std::int64_t i, std::int64_t d) { return qkv[i * ldq + k_at(pr) + d]; };
        auto V = [&](std::int64_t i, std::int64_t d) { return qkv[i * ldq + k_at(pr) + hn + d]; };
        auto dO = [&](std::int64_t i, std::int64_t d) { return dout[i * ldo + pr * hn + d]; };
        // Per row: p, its relative bound, mu, g, dS and dS's bound, kept for dk and dv.
        std::vector<double> P(s * s, 0.0), epsP(s * s, 0.0), MU(s * s, 0.0), dS(s * s, 0.0), EdS(s * s, 0.0);
        std::vector<float> mult(s);
        for (std::int64_t i = 0; i < s; ++i) {
            const std::int64_t n = f.skip_diagonal ? std::max<std::int64_t>(i, 1) : i + 1;
            const std::int64_t lo = doc_start.empty() ? 0 : doc_start[pr / a.np * s + i];
            EXPECT_TRUE(lo >= 0 && lo < n) << "doc_start " << lo << " of row " << i;
            std::vector<double> sc(n), es(n);
            double m = -INFINITY, max_es = 0.0, max_abs = 0.0;
            for (std::int64_t j = lo; j < n; ++j) {
                double dot = 0.0, mag = 0.0;
                for (std::int64_t d = 0; d < hn; ++d) {
                    dot += Q(i, d) * K(j, d);
                    mag += std::abs(Q(i, d) * K(j, d));
                }
                sc[j] = scale * dot;
                es[j] = 2.0 * (hn + 2) * u * scale * mag + 2.0 * u * std::abs(sc[j]);
                m = std::max(m, sc[j]);
                max_es = std::max(max_es, es[j]);
                max_abs = std::max(max_abs, std::abs(sc[j]));
            }
            const double tiles = static_cast<double>((n + 31) / 32);
            double R = 0.0, sum = 0.0;
            for (std::int64_t j = lo; j < n; ++j) {
                R = std::max(R, es[j] + max_es + 2.0 * u * (std::abs(sc[j]) + std::abs(m)) + e_exp);
                sum += std::exp(sc[j] - m);
            }
            R += tiles * (2.0 * max_es + 4.0 * u * max_abs + e_exp);
            const double eps = 2.0 * R + 2.0 * (n + 2) * u;
            const double lse = m + std::log(sum);
            const double e_lse = R + 2.0 * (n + 2) * u + 16.0 * u * (1.0 + std::abs(std::log(sum))) + 2.0 * u * std::abs(lse);
            r.lse[pr * s + i] = lse;
            r.lse_bound[pr * s + i] = e_lse;
            if (drop) cpu::dropout_multipliers(a.seed, a.offset + static_cast<std::uint64_t>((pr * s + i) * s), n, thr, keep, mult.data());
            for (std::int64_t j = lo; j < n; ++j) {
                const double p = std::exp(sc[j] - m) / sum;
                P[i * s + j] = p;
                MU[i * s + j] = drop ? mult[j] : 1.0;
                epsP[i * s + j] = eps + es[j] + 2.0 * u * (std::abs(sc[j]) + std::abs(lse)) + e_lse + e_exp;
                r.probs[(pr * s + i) * s + j] = p;
                r.probs_bound[(pr * s + i) * s + j] = eps * p + underflow_error(DType::F32);
                worst_rel = std::max({worst_rel, eps, epsP[i * s + j]});
            }
            // Forward output row.
            std::vector<double> orow(hn), obound(hn);
            for (std::int64_t d = 0; d < hn; ++d) {
                double o = 0.0, mag = 0.0, round = 0.0;
                for (std::int64_t j = lo; j < n; ++j) {
                    const double pm = P[i * s + j] * MU[i * s + j];
                    o += pm * V(j, d);
                    mag += pm * std::abs(V(j, d));
                    round += to_gemm(pm) * std::abs(V(j, d));
                }
                orow[d] = o;
                obound[d] = mag * (eps + 2.0 * u) + round + 2.0 * (n + 1) * u * mag + output_rounding(t, o);
                r.out[i * ldo + pr * hn + d] = o;
                r.out_bound[i * ldo + pr * hn + d] = obound[d];
            }
            // Backward through the softmax for this row.
            std::vector<double> g(n), eg(n);
            double D = 0.0, ED_plain = 0.0, Dmag = 0.0;
            for (std::int64_t j = lo; j < n; ++j) {
                double dot = 0.0, mag = 0.0;
                for (std::int64_t d = 0; d < hn; ++d) {
                    dot += dO(i, d) * V(j, d);
                    mag += std::abs(dO(i, d) * V(j, d));
                }
                g[j] = MU[i * s + j] * dot;
                eg[j] = MU[i * s + j] * 2.0 * (hn + 1) * u * mag + 2.0 * u * std::abs(g[j]);
                const double p = P[i * s + j];
                D += p * g[j];
                Dmag += p * std::abs(g[j]);
                ED_plain += epsP[i * s + j] * p * std::abs(g[j]) + p * eg[j];
            }
            ED_plain += 2.0 * (n + 2) * u * Dmag;
            double ED_flash = 0.0;
            for (std::int64_t d = 0; d < hn; ++d)
                ED_flash += std::abs(dO(i, d)) * (obound[d] + 2.0 * (hn + 1) * u * (std::abs(orow[d]) + obound[d]));
            const double ED = std::max(ED_plain, ED_flash);
            for (std::int64_t j = lo; j < n; ++j) {
                const double p = P[i * s + j];
                const double ds = f.no_rowsum ? p * g[j] : p * (g[j] - D);
                dS[i * s + j] = ds;
                EdS[i * s + j] = epsP[i * s + j] * p * std::abs(g[j] - D) + p * (eg[j] + ED) +
                                 3.0 * u * std::abs(ds) + to_gemm(ds) +
                                 (t == DType::F32 ? 0.0 : underflow_error(t) / scale);
            }
        }
        // Gradients: dq by rows, dk and dv by key columns.
        for (std::int64_t i = 0; i < s; ++i)
            for (std::int64_t d = 0; d < hn; ++d) {
                double dq = 0.0, edq = 0.0, mq = 0.0, dk = 0.0, edk = 0.0, mk = 0.0, dv = 0.0, edv = 0.0, mv = 0.0;
                for (std::int64_t j = 0; j < s; ++j) {
                    dq += scale * dS[i * s + j] * K(j, d);
                    edq += scale * EdS[i * s + j] * std::abs(K(j, d));
                    mq += scale * std::abs(dS[i * s + j] * K(j, d));
                    // Key/value i from the query rows j >= i.
                    dk += scale * dS[j * s + i] * Q(j, d);
                    edk += scale * EdS[j * s + i] * std::abs(Q(j, d));
                    mk += scale * std::abs(dS[j * s + i] * Q(j, d));
                    const double pm = P[j * s + i] * MU[j * s + i];
                    dv += pm * dO(j, d);
                    edv += MU[j * s + i] * (epsP[j * s + i] + 2.0 * u) * P[j * s + i] * std::abs(dO(j, d)) +
                           to_gemm(pm) * std::abs(dO(j, d));
                    mv += pm * std::abs(dO(j, d));
                }
                const std::int64_t at = i * ldq + q_at(pr) + d;
                r.dqkv[at] = dq;
                r.dqkv_bound[at] = edq + 2.0 * (i + 3) * u * mq + output_rounding(t, dq);
                // The group's dk, dv: summed over its heads here, bounds finished below.
                if (f.first_head_dkv && pr % qpg != 0) continue;
                const std::int64_t kat = i * ldq + k_at(pr) + d;
                r.dqkv[kat] += dk;
                r.dqkv_bound[kat] += edk;
                mag[kat] += mk;
                r.dqkv[kat + hn] += dv;
                r.dqkv_bound[kat + hn] += edv;
                mag[kat + hn] += mv;
            }
    }
    const double ut = unit_roundoff(t);
    for (std::int64_t i = 0; i < s; ++i)
        for (std::int64_t g = 0; g < kvp; ++g)
            for (std::int64_t d = 0; d < 2 * hn; ++d) {
                const std::int64_t kat = i * ldq + g * (qpg + 2) * hn + qpg * hn + d;
                const double n = static_cast<double>(qpg * (s - i + 2));
                r.dqkv_bound[kat] += 2.0 * n * u * mag[kat] + (qpg - 1) * ut * mag[kat] + output_rounding(t, r.dqkv[kat]);
            }
    EXPECT_LT(worst_rel + unit_roundoff(t), 0.125) << "first-order bounds assume small relative errors";
    for (auto* v : {&r.out_bound, &r.probs_bound, &r.lse_bound, &r.dqkv_bound})
        for (double& b : *v) b *= 9.0 / 8.0;
    return r;
}

}  // namespace gpt::test
