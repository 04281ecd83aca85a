// Plain causal attention: per (batch, head) the full s x s scores by GEMM, a row softmax,
// and GEMMs for the context and the gradients. Probabilities (before dropout) are saved.
#include <limits>
#include <vector>

#include "backend/cpu/attention.hpp"
#include "backend/cpu/blas.hpp"
#include "backend/cpu/common.hpp"
#include "backend/cpu/dropout_mask.hpp"
#include "backend/cpu/vmath.hpp"

namespace gpt::cpu {

namespace {
// pd[i, j] = p[i, j] * dropout multiplier for the causal part (j <= i); the rest is 0 in p.
void apply_dropout_rows(const AttnShape& sh, std::int64_t pair, const float* p, float* pd,
                        float* mult) {
    const std::uint32_t thr = dropout_threshold(sh.dropout);
    const float keep_scale = 1.0f / (1.0f - sh.dropout);
    const std::int64_t s = sh.s;
    for (std::int64_t i = 0; i < s; ++i) {
        dropout_multipliers(sh.seed, sh.mask_index(pair, i), i + 1, thr, keep_scale, mult);
        const float* pr = p + i * s;
        float* dr = pd + i * s;
#pragma omp simd
        for (std::int64_t j = 0; j <= i; ++j) dr[j] = pr[j] * mult[j];
        for (std::int64_t j = i + 1; j < s; ++j) dr[j] = 0.0f;
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
            const float* q = qkv + sh.qkv_at(pair);
            const float* k = q + hn;
            const float* v = q + 2 * hn;
            float* p = probs + pair * s * s;
            // p = scale * q k^T  [s, s]
            sgemm(false, true, s, s, hn, sh.scale, q, ldq, k, ldq, 0.0f, p, s);
            for (std::int64_t i = 0; i < s; ++i) {
                float* row = p + i * s;
                float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
                for (std::int64_t j = 0; j <= i; ++j) m = std::max(m, row[j]);
                float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
                for (std::int64_t j = 0; j <= i; ++j) {
                    row[j] = fast_exp(row[j] - m);
                    sum += row[j];
                }
                const float inv = 1.0f / sum;
#pragma omp simd
                for (std::int64_t j = 0; j <= i; ++j) row[j] *= inv;
                for (std::int64_t j = i + 1; j < s; ++j) row[j] = 0.0f;
            }
            const float* pv = p;
            if (drop) {
                apply_dropout_rows(sh, pair, p, pd.data(), mult.data());
                pv = pd.data();
            }
            // out = dropout(p) v  [s, hn]
            sgemm(false, false, s, hn, s, 1.0f, pv, s, v, ldq, 0.0f, out + sh.out_at(pair), ldo);
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
#pragma omp for schedule(dynamic)
        for (std::int64_t pair = 0; pair < sh.pairs(); ++pair) {
            const float* q = qkv + sh.qkv_at(pair);
            const float* k = q + hn;
            const float* v = q + 2 * hn;
            const float* dO = dout + sh.out_at(pair);
            float* dq = dqkv + sh.qkv_at(pair);
            float* dk = dq + hn;
            float* dv = dq + 2 * hn;
            const float* p = probs + pair * s * s;
            const float* pv = p;
            if (drop) {
                apply_dropout_rows(sh, pair, p, pd.data(), mult.data());
                pv = pd.data();
            }
            // dv = dropout(p)^T dout
            sgemm(true, false, s, hn, s, 1.0f, pv, s, dO, ldo, 0.0f, dv, ldq);
            // d(dropout(p)) = dout v^T, then through dropout and the softmax:
            // ds = p * (dp - rowsum(p * dp))
            sgemm(false, true, s, s, hn, 1.0f, dO, ldo, v, ldq, 0.0f, ds.data(), s);
            for (std::int64_t i = 0; i < s; ++i) {
                float* row = ds.data() + i * s;
                const float* pr = p + i * s;
                if (drop) {
                    dropout_multipliers(sh.seed, sh.mask_index(pair, i), i + 1, thr, keep_scale,
                                        mult.data());
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
            // dq = scale * ds k ; dk = scale * ds^T q
            sgemm(false, false, s, hn, s, sh.scale, ds.data(), s, k, ldq, 0.0f, dq, ldq);
            sgemm(true, false, s, hn, s, sh.scale, ds.data(), s, q, ldq, 0.0f, dk, ldq);
        }
    }
}

}  // namespace gpt::cpu
