// Causal attention, plain and flash, forward and backward, with and without dropout,
// against an fp64 reference (itself checked by finite differences), and against each other;
// with grouped K/V heads (heads_per_group 1, 2, 4: each group's K/V read in place).
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
AttnRef attn_ref(const Shape& sh, const std::vector<double>& qkv, const std::vector<double>& dout,
                 double p, std::uint64_t seed, std::uint64_t offset, double scale_in = 0.0) {
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
        for (std::int64_t i = 0; i < s; ++i) {
            double mx = -1e300;
            for (std::int64_t j = 0; j <= i; ++j) {
                double d = 0;
                for (std::int64_t c = 0; c < hn; ++c) d += qkv[at(i, pr, 0, c)] * qkv[at(j, pr, 1, c)];
                P[i * s + j] = d * scale;
                mx = std::max(mx, P[i * s + j]);
                const std::uint64_t idx = offset + (pr * s + i) * s + j;
                M[i * s + j] = dropout_keep(seed, idx, thr) ? 1.0 / (1.0 - p) : 0.0;
            }
            double sum = 0;
            for (std::int64_t j = 0; j <= i; ++j) sum += (P[i * s + j] = std::exp(P[i * s + j] - mx));
            for (std::int64_t j = 0; j <= i; ++j) P[i * s + j] /= sum;
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
        AttnRef r = attn_ref(sh, qkv, dout, p, 5, 9);
        for (std::size_t e = 0; e < qkv.size(); ++e) {
            auto plus = qkv, minus = qkv;
            plus[e] += 1e-6;
            minus[e] -= 1e-6;
            auto op = attn_ref(sh, plus, dout, p, 5, 9).out, om = attn_ref(sh, minus, dout, p, 5, 9).out;
            double fd = 0;
            for (std::size_t i = 0; i < op.size(); ++i) fd += (op[i] - om[i]) / 2e-6 * dout[i];
            EXPECT_NEAR(fd, r.dqkv[e], 1e-7) << "element " << e << " p=" << p;
        }
    }
  }
}

struct AttnRun {
    std::vector<double> out, dqkv;
};

AttnRun run_backend(Backend& be, const Shape& sh, DType t, bool flash, float p,
                const std::vector<double>& qkv, const std::vector<double>& dout,
                float softmax_scale = 0.0f) {
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
    const std::size_t saved_bytes = be.attention_saved_bytes(a);
    Buf saved(be, DType::F32, saved_bytes / 4);
    be.attention_forward(a, bq.p(), bo.p(), saved.p());
    be.attention_backward(a, bq.p(), bo.p(), saved.p(), bdo.p(), bdq.p());
    return {bo.get(), bdq.get()};
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
