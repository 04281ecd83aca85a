// RMSNorm, SwiGLU and the grouped-QKV expansion with rotary embeddings: forward against an
// fp64 reference written from the papers' formulas (rope as Megatron's cos/sin tables with
// rotate_half, not the kernel's pairwise rotation), backward against central finite
// differences of that fp64 reference. The backend computes in fp32 from fp32 inputs here:
// forward errors are a few fp32 roundings of O(1) values (tol_for(F32) x a small factor for
// the sums over a row), and the finite differences of the fp64 reference are exact to
// ~1e-9 (step 1e-6, third derivatives O(1)), far below that.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "backend_test_util.hpp"

namespace gpt::test {
namespace {

using Vec = std::vector<double>;

// d/d in of sum(f(in) * dy), central differences.
Vec finite_diff(const std::function<Vec(const Vec&)>& f, const Vec& in, const Vec& dy) {
    Vec g(in.size());
    const double h = 1e-6;
    for (std::size_t i = 0; i < in.size(); ++i) {
        Vec p = in, m = in;
        p[i] += h;
        m[i] -= h;
        const Vec fp = f(p), fm = f(m);
        double s = 0;
        for (std::size_t j = 0; j < dy.size(); ++j) s += (fp[j] - fm[j]) * dy[j];
        g[i] = s / (2 * h);
    }
    return g;
}

Tol fp32_tol(double scale) { return tol_for(DType::F32, scale); }

Vec rms_ref(const Vec& x, const Vec& g, std::int64_t rows, std::int64_t cols, double eps) {
    Vec y(x.size());
    for (std::int64_t r = 0; r < rows; ++r) {
        double ms = 0;
        for (std::int64_t i = 0; i < cols; ++i) ms += x[r * cols + i] * x[r * cols + i];
        const double rs = 1.0 / std::sqrt(ms / cols + eps);
        for (std::int64_t i = 0; i < cols; ++i) y[r * cols + i] = x[r * cols + i] * rs * g[i];
    }
    return y;
}

TEST(DecoderOps, RmsNormForwardAndFiniteDifferenceGradients) {
    auto be = cpu_backend();
    const std::int64_t rows = 5, cols = 24;
    const double eps = 1e-5;
    const Vec x = rounded(DType::F32, random_vec(rows * cols, 1, -2.0, 2.0));
    const Vec g = rounded(DType::F32, random_vec(cols, 2, 0.5, 1.5));
    const Vec dy = rounded(DType::F32, random_vec(rows * cols, 3));
    Buf bx(*be, DType::F32, x), bg(*be, DType::F32, g), by(*be, DType::F32, rows * cols);
    Buf rstd(*be, DType::F32, rows);
    be->rmsnorm_forward(bx.p(), bg.p(), by.p(), rstd.f32(), rows, cols, static_cast<float>(eps), DType::F32);
    EXPECT_TRUE(all_close(by.get(), rms_ref(x, g, rows, cols, eps), fp32_tol(4)));

    // dgamma starts non-zero: it must accumulate. dresidual is added into dx.
    const Vec g0 = random_vec(cols, 4), res = random_vec(rows * cols, 5);
    Buf bdy(*be, DType::F32, dy), dx(*be, DType::F32, rows * cols), dg(*be, DType::F32, g0);
    Buf bres(*be, DType::F32, res);
    be->rmsnorm_backward(bdy.p(), bx.p(), bg.p(), rstd.f32(), bres.p(), dx.p(), dg.f32(), rows,
                         cols, DType::F32);
    Vec want_dx = finite_diff([&](const Vec& v) { return rms_ref(v, g, rows, cols, eps); }, x, dy);
    for (std::size_t i = 0; i < want_dx.size(); ++i) want_dx[i] += static_cast<float>(res[i]);
    EXPECT_TRUE(all_close(dx.get(), want_dx, fp32_tol(8)));
    Vec want_dg = finite_diff([&](const Vec& v) { return rms_ref(x, v, rows, cols, eps); }, g, dy);
    for (std::int64_t i = 0; i < cols; ++i) want_dg[i] += static_cast<float>(g0[i]);
    EXPECT_TRUE(all_close(dg.get(), want_dg, fp32_tol(8 * rows)));

    // In place into the residual gradient, as the model calls it.
    be->rmsnorm_backward(bdy.p(), bx.p(), bg.p(), rstd.f32(), bres.p(), bres.p(), dg.f32(), rows,
                         cols, DType::F32);
    EXPECT_TRUE(all_close(bres.get(), dx.get(), {0, 0}));
}

Vec swiglu_ref(const Vec& x, std::int64_t rows, std::int64_t cols) {
    Vec y(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t i = 0; i < cols; ++i) {
            const double gate = x[r * 2 * cols + i], up = x[r * 2 * cols + cols + i];
            y[r * cols + i] = gate / (1.0 + std::exp(-gate)) * up;
        }
    return y;
}

TEST(DecoderOps, SwigluForwardAndFiniteDifferenceGradients) {
    auto be = cpu_backend();
    const std::int64_t rows = 4, cols = 11;
    const Vec x = rounded(DType::F32, random_vec(rows * 2 * cols, 11, -3.0, 3.0));
    const Vec dy = rounded(DType::F32, random_vec(rows * cols, 12));
    Buf bx(*be, DType::F32, x), by(*be, DType::F32, rows * cols);
    be->swiglu_forward(bx.p(), by.p(), rows, cols, DType::F32);
    EXPECT_TRUE(all_close(by.get(), swiglu_ref(x, rows, cols), fp32_tol(4)));
    Buf bdy(*be, DType::F32, dy), dx(*be, DType::F32, rows * 2 * cols);
    be->swiglu_backward(bdy.p(), bx.p(), dx.p(), rows, cols, DType::F32);
    EXPECT_TRUE(all_close(dx.get(),
                          finite_diff([&](const Vec& v) { return swiglu_ref(v, rows, cols); }, x, dy),
                          fp32_tol(8)));
}

// Megatron's formulation: freqs = outer(pos, base^(-2i/dim)), emb = cat(freqs, freqs) (or
// each repeated twice when interleaved), t' = t cos(emb) + rotate_half(t) sin(emb).
void rope_ref(double* t, std::int64_t pos, std::int64_t dim, double base, bool interleaved) {
    std::vector<double> emb(dim), rh(dim);
    for (std::int64_t d = 0; d < dim; ++d) {
        const std::int64_t i = interleaved ? d / 2 : d % (dim / 2);
        emb[d] = pos * std::pow(base, -2.0 * i / dim);
    }
    for (std::int64_t d = 0; d < dim; ++d) {
        if (interleaved) rh[d] = d % 2 == 0 ? -t[d + 1] : t[d - 1];
        else rh[d] = d < dim / 2 ? -t[d + dim / 2] : t[d - dim / 2];
    }
    for (std::int64_t d = 0; d < dim; ++d) t[d] = t[d] * std::cos(emb[d]) + rh[d] * std::sin(emb[d]);
}

// positions: [b, s] (--reset-position-ids), or empty: row r at r / b.
Vec expand_ref(const QkvExpandArgs& a, const Vec& in, const std::vector<std::int32_t>& positions = {}) {
    const std::int64_t rows = a.s * a.b, hn = a.hn, qpg = a.heads_per_group, np = a.groups * qpg;
    auto pos = [&](std::int64_t r) -> std::int64_t {
        return positions.empty() ? r / a.b : positions[static_cast<std::size_t>(r % a.b * a.s + r / a.b)];
    };
    if (a.keep_groups) {  // the grouped layout, queries and keys rotated
        Vec out = in;
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t v = 0; v < a.groups * (qpg + 2); ++v)
                if (a.rotary_dim > 0 && v % (qpg + 2) <= qpg)
                    rope_ref(&out[static_cast<std::size_t>((r * a.groups * (qpg + 2) + v) * hn)], pos(r),
                             a.rotary_dim, a.rotary_base, a.rotary_interleaved);
        return out;
    }
    Vec out(static_cast<std::size_t>(rows * np * 3 * hn));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t h = 0; h < np; ++h) {
            const std::int64_t g = h / qpg, i = h % qpg;
            const double* grp = &in[static_cast<std::size_t>((r * a.groups + g) * (qpg + 2) * hn)];
            double* o = &out[static_cast<std::size_t>((r * np + h) * 3 * hn)];
            for (std::int64_t d = 0; d < hn; ++d) {
                o[d] = grp[i * hn + d];
                o[hn + d] = grp[qpg * hn + d];
                o[2 * hn + d] = grp[(qpg + 1) * hn + d];
            }
            if (a.rotary_dim > 0) {
                rope_ref(o, pos(r), a.rotary_dim, a.rotary_base, a.rotary_interleaved);
                rope_ref(o + hn, pos(r), a.rotary_dim, a.rotary_base, a.rotary_interleaved);
            }
        }
    return out;
}

struct ExpandCase {
    std::int64_t groups, qpg, hn, rotary_dim;
    bool interleaved;
    bool keep_groups = false;  // rope only, the grouped layout kept (the model's use)
    bool reset_positions = false;  // QkvExpandArgs::positions: each sample's documents from 0
};

class QkvExpandTest : public ::testing::TestWithParam<ExpandCase> {};

TEST_P(QkvExpandTest, ForwardAndFiniteDifferenceGradients) {
    const ExpandCase c = GetParam();
    auto be = cpu_backend();
    QkvExpandArgs a;
    a.s = 5;
    a.b = 2;
    a.groups = c.groups;
    a.heads_per_group = c.qpg;
    a.hn = c.hn;
    a.rotary_dim = c.rotary_dim;
    a.rotary_base = 100.0f;  // small base: every pair turns noticeably over 5 positions
    a.rotary_interleaved = c.interleaved;
    a.keep_groups = c.keep_groups;
    const std::int64_t rows = a.s * a.b;
    const std::int64_t in_n = rows * c.groups * (c.qpg + 2) * c.hn;
    const std::int64_t out_n = c.keep_groups ? in_n : rows * c.groups * c.qpg * 3 * c.hn;
    const Vec in = rounded(DType::F32, random_vec(in_n, 21));
    const Vec dy = rounded(DType::F32, random_vec(out_n, 22));
    // Sample 0: documents of 2 and 3 tokens; sample 1: 4 and 1.
    std::vector<std::int32_t> positions;
    void* dpos = nullptr;
    if (c.reset_positions) {
        positions = {0, 1, 0, 1, 2, 0, 1, 2, 3, 0};
        dpos = be->alloc(positions.size() * 4);
        be->copy_to_device(dpos, positions.data(), positions.size() * 4);
        a.positions = static_cast<const std::int32_t*>(dpos);
    }
    Buf bin(*be, DType::F32, in), bout(*be, DType::F32, out_n);
    be->qkv_expand_forward(a, bin.p(), bout.p());
    EXPECT_TRUE(all_close(bout.get(), expand_ref(a, in, positions), fp32_tol(8)));
    Buf bdy(*be, DType::F32, dy), dg(*be, DType::F32, in_n);
    be->qkv_expand_backward(a, bdy.p(), dg.p());
    EXPECT_TRUE(all_close(dg.get(), finite_diff([&](const Vec& v) { return expand_ref(a, v, positions); }, in, dy),
                          fp32_tol(8 * c.qpg)));
    if (dpos) be->free(dpos);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, QkvExpandTest,
    ::testing::Values(ExpandCase{2, 1, 8, 8, false},   // rope, no grouping
                      ExpandCase{2, 3, 8, 8, false},   // GQA + full rope
                      ExpandCase{1, 4, 8, 4, false},   // MQA + partial rope
                      ExpandCase{2, 2, 8, 8, true},    // interleaved
                      ExpandCase{3, 2, 6, 0, false},   // GQA without rope
                      ExpandCase{2, 3, 8, 8, false, true},  // grouped kept, rope only
                      ExpandCase{1, 4, 8, 4, true, true},
                      ExpandCase{2, 3, 8, 8, false, true, true},  // --reset-position-ids
                      ExpandCase{2, 2, 8, 8, true, false, true}),
    [](const auto& info) {
        const ExpandCase& c = info.param;
        return "g" + std::to_string(c.groups) + "q" + std::to_string(c.qpg) + "rot" +
               std::to_string(c.rotary_dim) + (c.interleaved ? "i" : "") + (c.keep_groups ? "kept" : "") +
               (c.reset_positions ? "reset" : "");
    });

}  // namespace
}  // namespace gpt::test
