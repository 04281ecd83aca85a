// Plain causal attention: per (batch, head) the s x s scores by GEMM, a row softmax, and
// GEMMs for the context and the gradients; probabilities (before dropout) are saved. The
// GEMMs walk 64-row blocks and stop at the diagonal block, so the masked upper triangle
// costs no multiply-adds (it is stored as zeros, which the transposed products rely on).
#include <limits>
#include <vector>

#include "backend/cpu/attention.hpp"
#include "backend/cpu/blas.hpp"
#include "backend/cpu/common.hpp"
#include "backend/cpu/dropout_mask.hpp"
#include "backend/cpu/vmath.hpp"

namespace gpt::cpu {

namespace {
constexpr std::int64_t kRowBlock = 64;

// pd[i, :] = p[i, :] * dropout multipliers for rows [i0, i1); p is 0 above the diagonal.
void apply_dropout_rows(const AttnShape& sh, std::int64_t pair, const float* p, float* pd,
                        float* mult, std::int64_t i0, std::int64_t i1) {
    const std::uint32_t thr = dropout_threshold(sh.dropout);
    const float keep_scale = 1.0f / (1.0f - sh.dropout);
    const std::int64_t s = sh.s;
    for (std::int64_t i = i0; i < i1; ++i) {
        dropout_multipliers(sh.seed, sh.mask_index(pair, i), i + 1, thr, keep_scale, mult);
        const float* pr = p + i * s;
        float* dr = pd + i * s;
#pragma omp simd
        for (std::int64_t j = 0; j <= i; ++j) dr[j] = pr[j] * mult[j];
        for (std::int64_t j = i + 1; j < s; ++j) dr[j] = 0.0f;
    }
}

// Row-wise causal softmax of scores already in p[i, j0..i] (j0 = the row's first key under
// document masking, else 0), rows [i0, i1); zeros elsewhere, so every product over the
// masked keys adds nothing (the dropout and backward passes need no mask of their own).
void softmax_rows(const AttnShape& sh, std::int64_t pair, float* p, std::int64_t i0, std::int64_t i1) {
    const std::int64_t s = sh.s;
    for (std::int64_t i = i0; i < i1; ++i) {
        float* row = p + i * s;
        const std::int64_t j0 = sh.first_key(pair, i);
        float m = -std::numeric_limits<float>::infinity();
        for (std::int64_t j = j0; j <= i; ++j) m = row[j] > m ? row[j] : m;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (std::int64_t j = j0; j <= i; ++j) {
            row[j] = fast_exp(row[j] - m);
            sum += row[j];
        }
        const float inv = 1.0f / sum;
#pragma omp simd
        for (std::int64_t j = j0; j <= i; ++j) row[j] *= inv;
        for (std::int64_t j = 0; j < j0; ++j) row[j] = 0.0f;
        for (std::int64_t j = i + 1; j < s; ++j) row[j] = 0.0f;
    }
}
}  // namespace

void attention_plain_forward(const AttnShape& sh, const float* qkv, float* out, float* probs) {
    const std::int64_t s = sh.s, hn = sh.hn, ldq = sh.ld_qkv(), ldo = sh.ld_out();
    const bool drop = sh.dropout > 0.0f;
    BlasSerialRegion serial;
#pragma omp parallel
    {
        std::vector<float> pd(drop ? s * s : 0), mult(drop ? s : 0);
#pragma omp for schedule(dynamic)
        for (std::int64_t pair = 0; pair < sh.pairs(); ++pair) {
            const float* q = qkv + sh.q_at(pair);
            const float* k = qkv + sh.k_at(pair / sh.qpg);
            const float* v = k + hn;
            float* p = probs + pair * s * s;
            for (std::int64_t i0 = 0; i0 < s; i0 += kRowBlock) {
                const std::int64_t i1 = std::min(s, i0 + kRowBlock);
                // p[i0:i1, 0:i1] = scale * q k^T
                sgemm(false, true, i1 - i0, i1, hn, sh.scale, q + i0 * ldq, ldq, k, ldq, 0.0f,
                      p + i0 * s, s);
                softmax_rows(sh, pair, p, i0, i1);
                const float* pv = p;
                if (drop) {
                    apply_dropout_rows(sh, pair, p, pd.data(), mult.data(), i0, i1);
                    pv = pd.data();
                }
                // out[i0:i1] = dropout(p)[i0:i1, 0:i1] v[0:i1]
                sgemm(false, false, i1 - i0, hn, i1, 1.0f, pv + i0 * s, s, v, ldq, 0.0f,
                      out + sh.out_at(pair) + i0 * ldo, ldo);
            }
        }
    }
}

void attention_plain_backward(const AttnShape& sh, const float* qkv, const float* probs,
                              const float* dout, float* dqkv) {
    const std::int64_t s = sh.s, hn = sh.hn, ldq = sh.ld_qkv(), ldo = sh.ld_out();
    const bool drop = sh.dropout > 0.0f;
    const std::uint32_t thr = dropout_threshold(sh.dropout);
    const float keep_scale = drop ? 1.0f / (1.0f - sh.dropout) : 1.0f;
    BlasSerialRegion serial;
#pragma omp parallel
    {
        std::vector<float> pd(drop ? s * s : 0), mult(s), ds(s * s);
        // One (batch, K/V group) per task, its query heads in order: the group's dk, dv are
        // written by the first head's products and accumulated by the others' (beta = 1).
#pragma omp for schedule(dynamic)
        for (std::int64_t kv = 0; kv < sh.kv_pairs(); ++kv) {
            for (std::int64_t pair = kv * sh.qpg; pair < (kv + 1) * sh.qpg; ++pair) {
                const float* q = qkv + sh.q_at(pair);
                const float* k = qkv + sh.k_at(pair / sh.qpg);
                const float* v = k + hn;
                const float* dO = dout + sh.out_at(pair);
                float* dq = dqkv + sh.q_at(pair);
                float* dk = dqkv + sh.k_at(pair / sh.qpg);
                float* dv = dk + hn;
                const float beta = pair % sh.qpg == 0 ? 0.0f : 1.0f;
                const float* p = probs + pair * s * s;
                const float* pv = p;
                if (drop) {
                    apply_dropout_rows(sh, pair, p, pd.data(), mult.data(), 0, s);
                    pv = pd.data();
                }
                // dv[j0:j1] = dropout(p)[j0:s, j0:j1]^T dout[j0:s]  (rows above j0 are 0 there)
                for (std::int64_t j0 = 0; j0 < s; j0 += kRowBlock) {
                    const std::int64_t j1 = std::min(s, j0 + kRowBlock);
                    sgemm(true, false, j1 - j0, hn, s - j0, 1.0f, pv + j0 * s + j0, s,
                          dO + j0 * ldo, ldo, beta, dv + j0 * ldq, ldq);
                }
                for (std::int64_t i0 = 0; i0 < s; i0 += kRowBlock) {
                    const std::int64_t i1 = std::min(s, i0 + kRowBlock);
                    // d(dropout(p))[i0:i1, 0:i1] = dout v^T, then through dropout and softmax:
                    // ds = p * (dp - rowsum(p * dp))
                    sgemm(false, true, i1 - i0, i1, hn, 1.0f, dO + i0 * ldo, ldo, v, ldq, 0.0f,
                          ds.data() + i0 * s, s);
                    for (std::int64_t i = i0; i < i1; ++i) {
                        float* row = ds.data() + i * s;
                        const float* pr = p + i * s;
                        if (drop) {
                            dropout_multipliers(sh.seed, sh.mask_index(pair, i), i + 1, thr,
                                                keep_scale, mult.data());
#pragma omp simd
                            for (std::int64_t j = 0; j <= i; ++j) row[j] *= mult[j];
                        }
                        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
                        for (std::int64_t j = 0; j <= i; ++j) dot += pr[j] * row[j];
#pragma omp simd
                        for (std::int64_t j = 0; j <= i; ++j) row[j] = pr[j] * (row[j] - dot);
                        for (std::int64_t j = i + 1; j < s; ++j) row[j] = 0.0f;
                    }
                    // dq[i0:i1] = scale * ds[i0:i1, 0:i1] k[0:i1]
                    sgemm(false, false, i1 - i0, hn, i1, sh.scale, ds.data() + i0 * s, s, k, ldq,
                          0.0f, dq + i0 * ldq, ldq);
                }
                // dk[j0:j1] = scale * ds[j0:s, j0:j1]^T q[j0:s]
                for (std::int64_t j0 = 0; j0 < s; j0 += kRowBlock) {
                    const std::int64_t j1 = std::min(s, j0 + kRowBlock);
                    sgemm(true, false, j1 - j0, hn, s - j0, sh.scale, ds.data() + j0 * s + j0, s,
                          q + j0 * ldq, ldq, beta, dk + j0 * ldq, ldq);
                }
            }
        }
    }
}

}  // namespace gpt::cpu
