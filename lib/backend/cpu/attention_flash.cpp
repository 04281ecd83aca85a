// Flash attention on the CPU: 64 x 64 tiles with an online softmax (Dao et al. 2022). The
// s x s matrix never exists; forward saves the row log-sum-exp, backward recomputes each
// tile's probabilities from it and uses D_i = rowsum(dO_i * O_i) in place of rowsum(P*dP)
// (equal because O_i = sum_j dropout(P)_ij V_j). Tile products are OpenBLAS calls so the
// inner loops run at GEMM speed.
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/attention.hpp"
#include "backend/cpu/blas.hpp"
#include "backend/cpu/common.hpp"
#include "backend/cpu/dropout_mask.hpp"
#include "backend/cpu/vmath.hpp"

namespace gpt::cpu {

namespace {
constexpr std::int64_t kTileQ = 64;  // query rows per tile
constexpr std::int64_t kTileK = 64;  // key rows per tile

// The columns [c0, nc) of key tile [j0, j0+bc) that row i (absolute) attends to: causal
// (nc) and, under document masking, from its first key (c0). Empty when c0 >= nc.
struct Cols {
    std::int64_t c0, nc;
};
inline Cols row_cols(const AttnShape& sh, std::int64_t pair, std::int64_t i, std::int64_t j0,
                     std::int64_t bc) {
    return {std::max<std::int64_t>(0, sh.first_key(pair, i) - j0),
            std::max<std::int64_t>(0, std::min(bc, i - j0 + 1))};
}
}  // namespace

void attention_flash_forward(const AttnShape& sh, const float* qkv, float* out, float* lse) {
    const std::int64_t s = sh.s, hn = sh.hn, ldq = sh.ld_qkv(), ldo = sh.ld_out();
    const bool drop = sh.dropout > 0.0f;
    const std::uint32_t thr = dropout_threshold(sh.dropout);
    const float keep_scale = drop ? 1.0f / (1.0f - sh.dropout) : 1.0f;
    const std::int64_t qtiles = (s + kTileQ - 1) / kTileQ;
    const float neg_inf = -std::numeric_limits<float>::infinity();
    BlasSerialRegion serial;
#pragma omp parallel
    {
        std::vector<float> st(kTileQ * kTileK), acc(kTileQ * hn), m(kTileQ), l(kTileQ),
            mult(kTileK);
        // Later query tiles see more keys: hand them out first for a balanced finish.
#pragma omp for schedule(dynamic)
        for (std::int64_t item = 0; item < sh.pairs() * qtiles; ++item) {
            const std::int64_t pair = item % sh.pairs();
            const std::int64_t i0 = (qtiles - 1 - item / sh.pairs()) * kTileQ;
            const std::int64_t br = std::min(kTileQ, s - i0);
            const float* q = qkv + sh.q_at(pair) + i0 * ldq;
            const float* kbase = qkv + sh.k_at(pair / sh.qpg);
            const float* vbase = kbase + hn;
            std::fill(acc.begin(), acc.begin() + br * hn, 0.0f);
            std::fill(m.begin(), m.end(), neg_inf);
            std::fill(l.begin(), l.end(), 0.0f);
            // Key tiles wholly before the tile's first key (its first row's: document starts
            // never decrease along a sample) are masked for every row: skipped.
            for (std::int64_t j0 = sh.first_key(pair, i0) / kTileK * kTileK; j0 <= i0 + br - 1; j0 += kTileK) {
                const std::int64_t bc = std::min(kTileK, std::min(s, i0 + br) - j0);
                // st = scale * q_tile k_tile^T  [br, bc]
                sgemm(false, true, br, bc, hn, sh.scale, q, ldq, kbase + j0 * ldq, ldq, 0.0f,
                      st.data(), kTileK);
                for (std::int64_t r = 0; r < br; ++r) {
                    float* row = st.data() + r * kTileK;
                    float* ar = acc.data() + r * hn;
                    const auto [c0, nc] = row_cols(sh, pair, i0 + r, j0, bc);
                    if (c0 >= nc) {  // the whole tile masked for this row: its state unchanged
                        for (std::int64_t j = 0; j < bc; ++j) row[j] = 0.0f;
                        continue;
                    }
                    float mt = m[r];
#pragma omp simd reduction(max : mt)
                    for (std::int64_t j = c0; j < nc; ++j) mt = std::max(mt, row[j]);
                    const float alpha = fast_exp(m[r] - mt);  // 0 on the row's first tile
                    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
                    for (std::int64_t j = c0; j < nc; ++j) {
                        row[j] = fast_exp(row[j] - mt);
                        sum += row[j];
                    }
                    for (std::int64_t j = 0; j < c0; ++j) row[j] = 0.0f;
                    for (std::int64_t j = nc; j < bc; ++j) row[j] = 0.0f;
                    l[r] = l[r] * alpha + sum;
                    m[r] = mt;
#pragma omp simd
                    for (std::int64_t c = 0; c < hn; ++c) ar[c] *= alpha;
                    if (drop) {
                        dropout_multipliers(sh.seed, sh.mask_index(pair, i0 + r) + j0 + c0, nc - c0, thr,
                                            keep_scale, mult.data());
#pragma omp simd
                        for (std::int64_t j = c0; j < nc; ++j) row[j] *= mult[j - c0];
                    }
                }
                // acc += p_tile v_tile  [br, hn]
                sgemm(false, false, br, hn, bc, 1.0f, st.data(), kTileK, vbase + j0 * ldq, ldq,
                      1.0f, acc.data(), hn);
            }
            float* o = out + sh.out_at(pair) + i0 * ldo;
            for (std::int64_t r = 0; r < br; ++r) {
                const float inv = 1.0f / l[r];
#pragma omp simd
                for (std::int64_t c = 0; c < hn; ++c) o[r * ldo + c] = acc[r * hn + c] * inv;
                lse[pair * s + i0 + r] = m[r] + std::log(l[r]);
            }
        }
    }
}

void attention_flash_backward(const AttnShape& sh, const float* qkv, const float* out,
                              const float* lse, const float* dout, float* dqkv) {
    const std::int64_t s = sh.s, hn = sh.hn, ldq = sh.ld_qkv(), ldo = sh.ld_out();
    const bool drop = sh.dropout > 0.0f;
    const std::uint32_t thr = dropout_threshold(sh.dropout);
    const float keep_scale = drop ? 1.0f / (1.0f - sh.dropout) : 1.0f;
    BlasSerialRegion serial;
    // One (batch, K/V group) per task, its query heads in order: its dq rows are summed over
    // key tiles and its dk, dv rows over the heads' query tiles, so no two threads ever
    // write the same gradient element and the sums' order is fixed.
#pragma omp parallel
    {
        // mult keeps the tile's dropout multipliers between the two uses.
        std::vector<float> p(kTileQ * kTileK), pd(kTileQ * kTileK), dp(kTileQ * kTileK),
            d(s), mult(kTileQ * kTileK);
#pragma omp for schedule(dynamic)
        for (std::int64_t kv = 0; kv < sh.kv_pairs(); ++kv) {
            const float* k = qkv + sh.k_at(kv);
            const float* v = k + hn;
            float* dk = dqkv + sh.k_at(kv);
            float* dv = dk + hn;
            for (std::int64_t i = 0; i < s; ++i)
                std::fill_n(dqkv + kv * sh.group_width() + i * ldq, sh.group_width(), 0.0f);
            for (std::int64_t pair = kv * sh.qpg; pair < (kv + 1) * sh.qpg; ++pair) {
                const float* q = qkv + sh.q_at(pair);
                const float* o = out + sh.out_at(pair);
                const float* dO = dout + sh.out_at(pair);
                const float* lrow = lse + pair * s;
                float* dq = dqkv + sh.q_at(pair);
                for (std::int64_t i = 0; i < s; ++i) {
                    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
                    for (std::int64_t c = 0; c < hn; ++c) acc += dO[i * ldo + c] * o[i * ldo + c];
                    d[i] = acc;
                }
                for (std::int64_t j0 = 0; j0 < s; j0 += kTileK) {
                    const std::int64_t bc = std::min(kTileK, s - j0);
                    for (std::int64_t i0 = (j0 / kTileQ) * kTileQ; i0 < s; i0 += kTileQ) {
                        // Document masking: a query tile whose first row starts after this key
                        // tile masks it whole, and so do all later ones (starts never decrease).
                        if (sh.first_key(pair, i0) >= j0 + bc) break;
                        const std::int64_t br = std::min(kTileQ, s - i0);
                        // p = exp(scale * q k^T - lse)  [br, bc], zero above the diagonal
                        sgemm(false, true, br, bc, hn, sh.scale, q + i0 * ldq, ldq, k + j0 * ldq, ldq,
                              0.0f, p.data(), kTileK);
                        for (std::int64_t r = 0; r < br; ++r) {
                            float* pr = p.data() + r * kTileK;
                            float* pdr = pd.data() + r * kTileK;
                            const auto [c0, nc] = row_cols(sh, pair, i0 + r, j0, bc);
                            const float lr = lrow[i0 + r];
                            for (std::int64_t j = 0; j < std::min(c0, bc); ++j) pr[j] = 0.0f;
#pragma omp simd
                            for (std::int64_t j = c0; j < nc; ++j) pr[j] = fast_exp(pr[j] - lr);
                            for (std::int64_t j = std::max(c0, nc); j < bc; ++j) pr[j] = 0.0f;
                            if (drop) {
                                // mr[j] is key j0 + j's multiplier; masked keys' are unused.
                                float* mr = mult.data() + r * kTileK;
                                if (c0 < nc)
                                    dropout_multipliers(sh.seed, sh.mask_index(pair, i0 + r) + j0 + c0, nc - c0,
                                                        thr, keep_scale, mr + c0);
                                for (std::int64_t j = 0; j < bc; ++j) pdr[j] = 0.0f;
#pragma omp simd
                                for (std::int64_t j = c0; j < nc; ++j) pdr[j] = pr[j] * mr[j];
                            }
                        }
                        const float* pv = drop ? pd.data() : p.data();
                        // dv_tile += dropout(p)^T dO_tile
                        sgemm(true, false, bc, hn, br, 1.0f, pv, kTileK, dO + i0 * ldo, ldo, 1.0f,
                              dv + j0 * ldq, ldq);
                        // dp = dO_tile v_tile^T, then ds = p * (dp * mask - D)
                        sgemm(false, true, br, bc, hn, 1.0f, dO + i0 * ldo, ldo, v + j0 * ldq, ldq,
                              0.0f, dp.data(), kTileK);
                        for (std::int64_t r = 0; r < br; ++r) {
                            float* dpr = dp.data() + r * kTileK;
                            const float* pr = p.data() + r * kTileK;
                            const float di = d[i0 + r];
                            const auto [c0, nc] = row_cols(sh, pair, i0 + r, j0, bc);
                            for (std::int64_t j = 0; j < std::min(c0, bc); ++j) dpr[j] = 0.0f;
                            if (drop) {
                                const float* mr = mult.data() + r * kTileK;
#pragma omp simd
                                for (std::int64_t j = c0; j < nc; ++j)
                                    dpr[j] = pr[j] * (dpr[j] * mr[j] - di);
                            } else {
#pragma omp simd
                                for (std::int64_t j = c0; j < nc; ++j) dpr[j] = pr[j] * (dpr[j] - di);
                            }
                            for (std::int64_t j = std::max(c0, nc); j < bc; ++j) dpr[j] = 0.0f;
                        }
                        // dq_tile += scale * ds k_tile ; dk_tile += scale * ds^T q_tile
                        sgemm(false, false, br, hn, bc, sh.scale, dp.data(), kTileK, k + j0 * ldq, ldq,
                              1.0f, dq + i0 * ldq, ldq);
                        sgemm(true, false, bc, hn, br, sh.scale, dp.data(), kTileK, q + i0 * ldq, ldq,
                              1.0f, dk + j0 * ldq, ldq);
                    }
                }
            }
        }
    }
}

}  // namespace gpt::cpu
