// Causal attention, plain and flash, forward and backward, with and without dropout,
// against an fp64 reference (itself checked by finite differences), and against each other;
// with grouped K/V heads (heads_per_group 1, 2, 4: each group's K/V read in place); with
// document masking (--reset-attention-mask's doc_start): against the reference, and a packed
// sample against its documents run one by one.
#include <gtest/gtest.h>

#include <cmath>

#include "backend_test_util.hpp"
#include "core/philox.hpp"

namespace gpt::test {
namespace {

struct Shape {
    std::int64_t s, b, np, hn;
    std::int64_t qpg = 1;  // query heads per K/V group
    // Elements of the grouped qkv [s, b, np/qpg, qpg + 2, hn] and of out [s, b, np, hn].
    std::int64_t nqkv() const { return s * b * (np + 2 * np / qpg) * hn; }
    std::int64_t nout() const { return s * b * np * hn; }
};

struct AttnRef {
    std::vector<double> out, dqkv;
};

// qkv [s, b, np/qpg, qpg + 2, hn] (pair pr's query, the key and value of its group
// pr / qpg), out [s, b, np, hn]; a group's dK/dV sums its heads' contributions.
// doc_start: [b, s] first key of each query (document masking), or empty: 0.
AttnRef attn_ref(const Shape& sh, const std::vector<double>& qkv, const std::vector<double>& dout,
                 double p, std::uint64_t seed, std::uint64_t offset, double scale_in = 0.0,
                 const std::vector<std::int32_t>& doc_start = {}) {
    const std::int64_t s = sh.s, hn = sh.hn, pairs = sh.b * sh.np;
    const double scale = scale_in != 0.0 ? scale_in : 1.0 / std::sqrt(static_cast<double>(hn));
    const std::uint32_t thr = dropout_threshold(static_cast<float>(p));
    AttnRef r;
    r.out.assign(s * pairs * hn, 0.0);
    r.dqkv.assign(static_cast<std::size_t>(sh.nqkv()), 0.0);
    const std::int64_t qpg = sh.qpg, row = pairs / qpg * (qpg + 2) * hn;
    auto at = [&](std::int64_t i, std::int64_t pr, int which, std::int64_t c) {
        const std::int64_t part = which == 0 ? pr % qpg : qpg + which - 1;
        return i * row + (pr / qpg * (qpg + 2) + part) * hn + c;
    };
    for (std::int64_t pr = 0; pr < pairs; ++pr) {
        std::vector<double> P(s * s, 0.0), M(s * s, 0.0);
        // Keys [first(i), i] of row i; the others keep P = 0, so every sum below skips them.
        auto first = [&](std::int64_t i) -> std::int64_t {
            return doc_start.empty() ? 0 : doc_start[static_cast<std::size_t>(pr / sh.np * s + i)];
        };
        for (std::int64_t i = 0; i < s; ++i) {
            double mx = -1e300;
            for (std::int64_t j = first(i); j <= i; ++j) {
                double d = 0;
                for (std::int64_t c = 0; c < hn; ++c) d += qkv[at(i, pr, 0, c)] * qkv[at(j, pr, 1, c)];
                P[i * s + j] = d * scale;
                mx = std::max(mx, P[i * s + j]);
                const std::uint64_t idx = offset + (pr * s + i) * s + j;
                M[i * s + j] = dropout_keep(seed, idx, thr) ? 1.0 / (1.0 - p) : 0.0;
            }
            double sum = 0;
            for (std::int64_t j = first(i); j <= i; ++j) sum += (P[i * s + j] = std::exp(P[i * s + j] - mx));
            for (std::int64_t j = first(i); j <= i; ++j) P[i * s + j] /= sum;
            for (std::int64_t c = 0; c < hn; ++c) {
                double o = 0;
                for (std::int64_t j = 0; j <= i; ++j) o += P[i * s + j] * M[i * s + j] * qkv[at(j, pr, 2, c)];
                r.out[(i * pairs + pr) * hn + c] = o;
            }
        }
        for (std::int64_t i = 0; i < s; ++i) {
            std::vector<double> dP(i + 1);
            double dot = 0;
            for (std::int64_t j = 0; j <= i; ++j) {
                double d = 0;
                for (std::int64_t c = 0; c < hn; ++c) d += dout[(i * pairs + pr) * hn + c] * qkv[at(j, pr, 2, c)];
                dP[j] = d * M[i * s + j];
                dot += dP[j] * P[i * s + j];
            }
            for (std::int64_t j = 0; j <= i; ++j) {
                const double ds = P[i * s + j] * (dP[j] - dot);
                const double pm = P[i * s + j] * M[i * s + j];
                for (std::int64_t c = 0; c < hn; ++c) {
                    r.dqkv[at(i, pr, 0, c)] += scale * ds * qkv[at(j, pr, 1, c)];
                    r.dqkv[at(j, pr, 1, c)] += scale * ds * qkv[at(i, pr, 0, c)];
                    r.dqkv[at(j, pr, 2, c)] += pm * dout[(i * pairs + pr) * hn + c];
                }
            }
        }
    }
    return r;
}

TEST(AttentionReference, GradientMatchesFiniteDifferences) {
  for (const Shape& sh : {Shape{4, 2, 1, 3}, Shape{4, 1, 4, 3, 2}}) {
    SCOPED_TRACE(::testing::Message() << "heads per group " << sh.qpg);
    auto qkv = random_vec(sh.nqkv(), 1);
    auto dout = random_vec(sh.nout(), 2);
    for (double p : {0.0, 0.3}) {
      // Plain causal, and documents of 2 and 2 tokens (sample 0) and 1 and 3 (sample 1).
      for (const auto& docs : {std::vector<std::int32_t>{}, std::vector<std::int32_t>{0, 0, 2, 2, 0, 1, 1, 1}}) {
        if (!docs.empty() && sh.b != 2) continue;
        AttnRef r = attn_ref(sh, qkv, dout, p, 5, 9, 0.0, docs);
        for (std::size_t e = 0; e < qkv.size(); ++e) {
            auto plus = qkv, minus = qkv;
            plus[e] += 1e-6;
            minus[e] -= 1e-6;
            auto op = attn_ref(sh, plus, dout, p, 5, 9, 0.0, docs).out;
            auto om = attn_ref(sh, minus, dout, p, 5, 9, 0.0, docs).out;
            double fd = 0;
            for (std::size_t i = 0; i < op.size(); ++i) fd += (op[i] - om[i]) / 2e-6 * dout[i];
            EXPECT_NEAR(fd, r.dqkv[e], 1e-7) << "element " << e << " p=" << p << " documents " << docs.size();
        }
      }
    }
  }
}

struct AttnRun {
    std::vector<double> out, dqkv;
};

AttnRun run_backend(Backend& be, const Shape& sh, DType t, bool flash, float p,
                const std::vector<double>& qkv, const std::vector<double>& dout,
                float softmax_scale = 0.0f, const std::vector<std::int32_t>& doc_start = {}) {
    AttentionArgs a;
    a.s = sh.s;
    a.b = sh.b;
    a.np = sh.np;
    a.hn = sh.hn;
    a.heads_per_group = sh.qpg;
    a.dtype = t;
    a.flash = flash;
    a.dropout = p;
    a.seed = 77;
    a.offset = 5;
    a.softmax_scale = softmax_scale;
    Buf bq(be, t, qkv), bo(be, t, dout.size()), bdo(be, t, dout), bdq(be, t, qkv.size());
    void* ds = nullptr;
    if (!doc_start.empty()) {
        ds = be.alloc(doc_start.size() * 4);
        be.copy_to_device(ds, doc_start.data(), doc_start.size() * 4);
        a.doc_start = static_cast<const std::int32_t*>(ds);
    }
    const std::size_t saved_bytes = be.attention_saved_bytes(a);
    Buf saved(be, DType::F32, saved_bytes / 4);
    be.attention_forward(a, bq.p(), bo.p(), saved.p());
    be.attention_backward(a, bq.p(), bo.p(), saved.p(), bdo.p(), bdq.p());
    if (ds) be.free(ds);
    return {bo.get(), bdq.get()};
}

// doc_start [b, s] of samples whose documents end (an EOD token) at the given positions:
// the position after the last end before i (Megatron's mask: no key at or before an EOD
// that precedes the query).
std::vector<std::int32_t> doc_starts(std::int64_t s, const std::vector<std::vector<std::int64_t>>& ends) {
    std::vector<std::int32_t> out;
    for (const auto& e : ends) {
        std::int32_t start = 0;
        std::size_t k = 0;
        for (std::int64_t i = 0; i < s; ++i) {
            while (k < e.size() && e[k] < i) start = static_cast<std::int32_t>(e[k++] + 1);
            out.push_back(start);
        }
    }
    return out;
}

const Shape kShapes[] = {{1, 1, 1, 4},       {5, 2, 3, 8},        {64, 1, 1, 32},
                         {70, 1, 2, 16},      {131, 2, 1, 64},     {5, 2, 4, 8, 2},
                         {70, 1, 4, 16, 4},   {131, 2, 4, 32, 2},  {67, 2, 8, 16, 4}};

class AttentionTest : public ::testing::TestWithParam<DType> {};

TEST_P(AttentionTest, PlainAndFlashMatchReference) {
    const DType t = GetParam();
    auto be = cpu_backend();
    for (const Shape& sh : kShapes) {
        auto qkv = rounded(t, random_vec(sh.nqkv(), 91, -1.5, 1.5));
        auto dout = rounded(t, random_vec(sh.nout(), 92));
        for (float p : {0.0f, 0.2f}) {
            AttnRef r = attn_ref(sh, qkv, dout, p, 77, 5);
            for (bool flash : {false, true}) {
                SCOPED_TRACE(::testing::Message() << "s=" << sh.s << " b=" << sh.b << " np="
                                                  << sh.np << " hn=" << sh.hn << " heads/group="
                                                  << sh.qpg << " p=" << p << " flash=" << flash);
                AttnRun got = run_backend(*be, sh, t, flash, p, qkv, dout);
                // fp32: a few ulp of O(1) values through exp/softmax and s-term sums.
                Tol tl = t == DType::F32 ? Tol{1e-5, 1e-5} : tol_for(t);
                tl.atol = std::max(tl.atol, tl.rtol);
                EXPECT_TRUE(all_close(got.out, r.out, tl));
                EXPECT_TRUE(all_close(got.dqkv, r.dqkv, tl));
            }
        }
    }
}

// Document masking: boundaries inside a 64-key tile and on one, a one-token document, a
// document spanning tiles, a last document starting past whole tiles (flash skips them), an
// EOD as the last token; each sample its own; grouped K/V.
TEST_P(AttentionTest, DocumentMaskMatchesReference) {
    const DType t = GetParam();
    auto be = cpu_backend();
    for (const Shape& sh : {Shape{150, 2, 2, 16}, Shape{150, 2, 4, 16, 2}}) {
        const auto docs = doc_starts(sh.s, {{9, 10, 63, 139, 149}, {0, 127}});
        auto qkv = rounded(t, random_vec(sh.nqkv(), 97, -1.5, 1.5));
        auto dout = rounded(t, random_vec(sh.nout(), 98));
        for (float p : {0.0f, 0.2f}) {
            AttnRef r = attn_ref(sh, qkv, dout, p, 77, 5, 0.0, docs);
            for (bool flash : {false, true}) {
                SCOPED_TRACE(::testing::Message() << "heads/group=" << sh.qpg << " p=" << p << " flash=" << flash);
                AttnRun got = run_backend(*be, sh, t, flash, p, qkv, dout, 0.0f, docs);
                Tol tl = t == DType::F32 ? Tol{1e-5, 1e-5} : tol_for(t);
                tl.atol = std::max(tl.atol, tl.rtol);
                EXPECT_TRUE(all_close(got.out, r.out, tl));
                EXPECT_TRUE(all_close(got.dqkv, r.dqkv, tl));
            }
        }
    }
}

// What the mask means: a sample packed from documents computes, for each document's rows,
// what the document alone computes (fp32, no dropout: the same products in a different
// tiling, so a few ulp), and the gradient of one document's keys has nothing from another's
// queries.
TEST(Attention, PackedDocumentsEqualEachDocumentAlone) {
    auto be = cpu_backend();
    const Shape sh{140, 1, 2, 16};
    const std::vector<std::int64_t> ends{69, 70, 139};  // documents [0, 70), [70, 71), [71, 140)
    const auto docs = doc_starts(sh.s, {ends});
    auto qkv = rounded(DType::F32, random_vec(sh.nqkv(), 99, -2.0, 2.0));
    auto dout = rounded(DType::F32, random_vec(sh.nout(), 100));
    const std::int64_t qrow = sh.nqkv() / sh.s, orow = sh.nout() / sh.s;
    for (bool flash : {false, true}) {
        AttnRun packed = run_backend(*be, sh, DType::F32, flash, 0.0f, qkv, dout, 0.0f, docs);
        std::int64_t begin = 0;
        for (std::int64_t end : ends) {
            const Shape one{end + 1 - begin, 1, 2, 16};
            auto slice = [&](const std::vector<double>& v, std::int64_t row) {
                return std::vector<double>(v.begin() + begin * row, v.begin() + (end + 1) * row);
            };
            AttnRun alone = run_backend(*be, one, DType::F32, flash, 0.0f, slice(qkv, qrow), slice(dout, orow));
            SCOPED_TRACE(::testing::Message() << "flash=" << flash << " document [" << begin << ", " << end + 1 << ")");
            EXPECT_TRUE(all_close(slice(packed.out, orow), alone.out, {1e-5, 2e-6}));
            EXPECT_TRUE(all_close(slice(packed.dqkv, qrow), alone.dqkv, {1e-5, 2e-6}));
            begin = end + 1;
        }
    }
}

TEST(Attention, FlashAgreesWithPlainInFp32) {
  auto be = cpu_backend();
  // several tiles, ragged last tile; and K/V groups of 2 heads
  for (const Shape& sh : {Shape{200, 2, 2, 40}, Shape{200, 2, 4, 40, 2}}) {
    auto qkv = rounded(DType::F32, random_vec(sh.nqkv(), 93, -2.0, 2.0));
    auto dout = rounded(DType::F32, random_vec(sh.nout(), 94));
    for (float p : {0.0f, 0.1f}) {
        AttnRun plain = run_backend(*be, sh, DType::F32, false, p, qkv, dout);
        AttnRun flash = run_backend(*be, sh, DType::F32, true, p, qkv, dout);
        EXPECT_TRUE(all_close(flash.out, plain.out, {1e-5, 2e-6})) << "p=" << p;
        EXPECT_TRUE(all_close(flash.dqkv, plain.dqkv, {1e-5, 2e-6})) << "p=" << p;
        AttnRun again = run_backend(*be, sh, DType::F32, true, p, qkv, dout);
        EXPECT_TRUE(all_close(again.dqkv, flash.dqkv, {0, 0})) << "reproducible";
    }
  }
}

TEST(Attention, ExplicitSoftmaxScale) {
    auto be = cpu_backend();
    const Shape sh{67, 1, 2, 16};
    auto qkv = rounded(DType::F32, random_vec(sh.nqkv(), 95));
    auto dout = rounded(DType::F32, random_vec(sh.nout(), 96));
    AttnRef r = attn_ref(sh, qkv, dout, 0.1, 77, 5, 0.7);
    for (bool flash : {false, true}) {
        AttnRun got = run_backend(*be, sh, DType::F32, flash, 0.1f, qkv, dout, 0.7f);
        EXPECT_TRUE(all_close(got.out, r.out, {1e-5, 1e-5})) << "flash=" << flash;
        EXPECT_TRUE(all_close(got.dqkv, r.dqkv, {1e-5, 1e-5})) << "flash=" << flash;
    }
}

TEST(Attention, SavedBytes) {
    auto be = cpu_backend();
    AttentionArgs a;
    a.s = 10;
    a.b = 2;
    a.np = 3;
    a.hn = 8;
    EXPECT_EQ(be->attention_saved_bytes(a), 4u * 2 * 3 * 10 * 10);
    a.flash = true;
    EXPECT_EQ(be->attention_saved_bytes(a), 4u * 2 * 3 * 10);
}

INSTANTIATE_TEST_SUITE_P(Types, AttentionTest, ::testing::ValuesIn(kAllTypes),
                         [](const auto& info) { return dname(info.param); });

}  // namespace
}  // namespace gpt::test
