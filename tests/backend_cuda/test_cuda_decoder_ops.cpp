// CUDA backend vs fp64 (and the CPU backend against the same bounds): RMSNorm, SwiGLU and
// the grouped-QKV expansion with rotary embeddings, in every storage type.
//
// Each op's exact result is computed in fp64 from the same rounded inputs and compared
// element by element with a bound from its fp32 arithmetic (u = 2^-24; sums of n terms in
// any order err by at most 2 (n+1) u times the sum of magnitudes, as in test_cuda_rows.cpp;
// expf, sinf, cosf and rsqrtf within 2 ulp = 4 u), plus the output's rounding to its type.
#include <cmath>

#include "cuda_test_util.hpp"
#include "backend/decoder_ops_common.hpp"

namespace gpt::test {
namespace {

class CudaDecoderOps : public CudaVsCpu {};

constexpr double kU = 0x1p-24;

// ---- RMSNorm -------------------------------------------------------------------------------
//  forward, a row of n: ms = sum(x^2)/n errs by 2 (n+2) u ms (squares, sum, division: all
//   terms positive); rstd = (ms + eps)^-1/2 by rho = (n+2) u + 5 u relatively (half of ms's,
//   rsqrtf 4 u, the add); y = x rstd g by |y| (rho + 3 u) (two products) + rounding.
//  backward with the fp32 rstd as an exact input, xh = x rstd, dg = dy gamma:
//   dx = rstd (dg - xh mean(dg xh)) + dres:
//     rstd (3 u |dg_j| + |xh_j| 2 (n+5) u mean|dg xh|) + 4 u |dx_j| + u |dres_j| + rounding;
//   dgamma_j += sum over rows of dy xh: 2 (rows+4) u (|dgamma0| + sum |dy xh|).
struct RmsExact {
    std::vector<double> y, y_bound, rstd, rstd_bound;
};
RmsExact rms_forward_exact(const std::vector<double>& x, const std::vector<double>& g,
                           std::int64_t rows, std::int64_t n, double eps, DType t) {
    RmsExact r;
    for (std::int64_t i = 0; i < rows; ++i) {
        double ss = 0.0;
        for (std::int64_t j = 0; j < n; ++j) ss += x[i * n + j] * x[i * n + j];
        const double rs = 1.0 / std::sqrt(ss / n + eps);
        const double rho = (n + 2) * kU + 5.0 * kU;
        r.rstd.push_back(rs);
        r.rstd_bound.push_back(rs * rho);
        for (std::int64_t j = 0; j < n; ++j) {
            const double y = x[i * n + j] * rs * g[j];
            r.y.push_back(y);
            r.y_bound.push_back(output_rounding(t, y) + std::abs(y) * (rho + 3.0 * kU));
        }
    }
    return r;
}

struct RmsGrad {
    std::vector<double> dx, dx_bound, dg, dg_bound;
};
RmsGrad rms_backward_exact(const std::vector<double>& dy, const std::vector<double>& x,
                           const std::vector<double>& g, const std::vector<double>& rstd,
                           const std::vector<double>& dres, const std::vector<double>& dg0,
                           std::int64_t rows, std::int64_t n, DType t) {
    RmsGrad r;
    std::vector<double> sg(n, 0.0), sgm(n, 0.0);
    for (std::int64_t i = 0; i < rows; ++i) {
        std::vector<double> xh(n), gg(n);
        double c = 0.0, cm = 0.0;
        for (std::int64_t j = 0; j < n; ++j) {
            xh[j] = x[i * n + j] * rstd[i];
            gg[j] = dy[i * n + j] * g[j];
            c += gg[j] * xh[j];
            cm += std::abs(gg[j] * xh[j]);
            sg[j] += dy[i * n + j] * xh[j];
            sgm[j] += std::abs(dy[i * n + j] * xh[j]);
        }
        c /= n;
        cm /= n;
        for (std::int64_t j = 0; j < n; ++j) {
            double d = rstd[i] * (gg[j] - xh[j] * c);
            double e = rstd[i] * (3.0 * kU * std::abs(gg[j]) + std::abs(xh[j]) * 2.0 * (n + 5) * kU * cm) +
                       4.0 * kU * std::abs(d);
            if (!dres.empty()) {
                d += dres[i * n + j];
                e += kU * std::abs(dres[i * n + j]);
            }
            r.dx.push_back(d);
            r.dx_bound.push_back(output_rounding(t, d) + e);
        }
    }
    for (std::int64_t j = 0; j < n; ++j) {
        r.dg.push_back(dg0[j] + sg[j]);
        r.dg_bound.push_back(2.0 * (rows + 4) * kU * (std::abs(dg0[j]) + sgm[j]));
    }
    return r;
}

TEST_F(CudaDecoderOps, RmsNormForwardBackward) {
    // Rows of whole 16-byte packs take the vectorized kernels (1024, 4096), odd widths the
    // element-wise ones.
    const std::int64_t shapes[][2] = {{1, 1}, {5, 33}, {40, 1024}, {4, 4096}, {3, 4100}};
    for (DType t : kAllTypes)
        for (auto& sh : shapes)
            for (bool alias : {false, true}) {
                const std::int64_t rows = sh[0], cols = sh[1];
                SCOPED_TRACE(dname(t) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                             (alias ? " dx=dy" : ""));
                const auto xv = rounded(t, random_vec(rows * cols, 40, -3.0, 3.0));
                const auto gv = rounded(t, random_vec(cols, 41, 0.5, 1.5));
                Twin x(cpu(), gpu(), t, xv), gamma(cpu(), gpu(), t, gv), y(cpu(), gpu(), t, rows * cols);
                Twin rstd(cpu(), gpu(), DType::F32, rows);
                cpu().rmsnorm_forward(x.c(), gamma.c(), y.c(), rstd.cf(), rows, cols, 1e-5f, t);
                gpu().rmsnorm_forward(x.g(), gamma.g(), y.g(), rstd.gf(), rows, cols, 1e-5f, t);
                const RmsExact f = rms_forward_exact(xv, gv, rows, cols, double(1e-5f), t);
                EXPECT_TRUE(within_bound(y.gpu_vals(), f.y, f.y_bound)) << "GPU y";
                EXPECT_TRUE(within_bound(y.cpu_vals(), f.y, f.y_bound)) << "CPU y";
                EXPECT_TRUE(within_bound(rstd.gpu_vals(), f.rstd, f.rstd_bound)) << "GPU rstd";
                EXPECT_TRUE(within_bound(rstd.cpu_vals(), f.rstd, f.rstd_bound)) << "CPU rstd";

                const auto dyv = rounded(t, random_vec(rows * cols, 42));
                Twin dy(cpu(), gpu(), t, dyv), dx_own(cpu(), gpu(), t, rows * cols);
                Twin& dx = alias ? dy : dx_own;
                const auto dg0 = rounded(DType::F32, random_vec(cols, 43));
                Twin dg(cpu(), gpu(), DType::F32, dg0);
                // Both sides use the CPU's rstd: the comparison is of backward only.
                gpu().copy_to_device(rstd.g(), rstd.c(), rows * 4);
                const auto rv = rstd.cpu_vals();
                cpu().rmsnorm_backward(dy.c(), x.c(), gamma.c(), rstd.cf(), nullptr, dx.c(), dg.cf(), rows, cols, t);
                gpu().rmsnorm_backward(dy.g(), x.g(), gamma.g(), rstd.gf(), nullptr, dx.g(), dg.gf(), rows, cols, t);
                const RmsGrad b = rms_backward_exact(dyv, xv, gv, rv, {}, dg0, rows, cols, t);
                EXPECT_TRUE(within_bound(dx.gpu_vals(), b.dx, b.dx_bound)) << "GPU dx";
                EXPECT_TRUE(within_bound(dx.cpu_vals(), b.dx, b.dx_bound)) << "CPU dx";
                EXPECT_TRUE(within_bound(dg.gpu_vals(), b.dg, b.dg_bound)) << "GPU dgamma";
                EXPECT_TRUE(within_bound(dg.cpu_vals(), b.dg, b.dg_bound)) << "CPU dgamma";

                // The residual gradient added, into its own buffer (the model's call).
                const auto dresv = rounded(t, random_vec(rows * cols, 44, -3.0, 3.0));
                Twin dres(cpu(), gpu(), t, dresv);
                const auto dy_gpu = dx.gpu_vals(), dg_gpu = dg.gpu_vals();
                gpu().rmsnorm_backward(dx.g(), x.g(), gamma.g(), rstd.gf(), dres.g(), dres.g(), dg.gf(), rows, cols, t);
                const RmsGrad br = rms_backward_exact(dy_gpu, xv, gv, rv, dresv, dg_gpu, rows, cols, t);
                EXPECT_TRUE(within_bound(dres.gpu_vals(), br.dx, br.dx_bound)) << "GPU dx + dres";
                EXPECT_TRUE(within_bound(dg.gpu_vals(), br.dg, br.dg_bound)) << "GPU dgamma, second call";
            }
}

// ---- SwiGLU --------------------------------------------------------------------------------
//  s = 1 / (1 + exp(-g)) errs by 6 u relatively (expf 4 u, the add and the division);
//  y = g s up: 8 u |y| + rounding; dup = dy g s: 8 u |dup|;
//  dgate = dy up s A, A = 1 + g (1 - s), where A may cancel: A errs by
//  e_A = |g| (6 u s + 2 u |1 - s|) + u |A|, so |dy up s| (9 u |A| + e_A).
TEST_F(CudaDecoderOps, SwiGluForwardBackward) {
    const std::int64_t shapes[][2] = {{1, 1}, {7, 13}, {33, 256}, {4, 1000}};
    for (DType t : kAllTypes)
        for (auto& sh : shapes) {
            const std::int64_t rows = sh[0], cols = sh[1];
            SCOPED_TRACE(dname(t) + " " + std::to_string(rows) + "x" + std::to_string(cols));
            const auto xv = rounded(t, random_vec(rows * 2 * cols, 50, -6.0, 6.0));
            const auto dyv = rounded(t, random_vec(rows * cols, 51));
            std::vector<double> y, yb, dx(rows * 2 * cols), dxb(rows * 2 * cols);
            for (std::int64_t r = 0; r < rows; ++r)
                for (std::int64_t j = 0; j < cols; ++j) {
                    const double g = xv[r * 2 * cols + j], up = xv[r * 2 * cols + cols + j];
                    const double d = dyv[r * cols + j];
                    const double s = 1.0 / (1.0 + std::exp(-g));
                    y.push_back(g * s * up);
                    yb.push_back(output_rounding(t, y.back()) + 8.0 * kU * std::abs(y.back()));
                    const double A = 1.0 + g * (1.0 - s);
                    const double eA = std::abs(g) * (6.0 * kU * s + 2.0 * kU * std::abs(1.0 - s)) + kU * std::abs(A);
                    const double dg = d * up * s * A, du = d * g * s;
                    dx[r * 2 * cols + j] = dg;
                    dxb[r * 2 * cols + j] = output_rounding(t, dg) + std::abs(d * up * s) * (9.0 * kU * std::abs(A) + eA);
                    dx[r * 2 * cols + cols + j] = du;
                    dxb[r * 2 * cols + cols + j] = output_rounding(t, du) + 8.0 * kU * std::abs(du);
                }
            Twin x(cpu(), gpu(), t, xv), out(cpu(), gpu(), t, rows * cols);
            cpu().swiglu_forward(x.c(), out.c(), rows, cols, t);
            gpu().swiglu_forward(x.g(), out.g(), rows, cols, t);
            EXPECT_TRUE(within_bound(out.gpu_vals(), y, yb)) << "GPU y";
            EXPECT_TRUE(within_bound(out.cpu_vals(), y, yb)) << "CPU y";
            Twin dy(cpu(), gpu(), t, dyv), gx(cpu(), gpu(), t, rows * 2 * cols);
            cpu().swiglu_backward(dy.c(), x.c(), gx.c(), rows, cols, t);
            gpu().swiglu_backward(dy.g(), x.g(), gx.g(), rows, cols, t);
            EXPECT_TRUE(within_bound(gx.gpu_vals(), dx, dxb)) << "GPU dx";
            EXPECT_TRUE(within_bound(gx.cpu_vals(), dx, dxb)) << "CPU dx";
        }
}

// ---- grouped QKV with rope -----------------------------------------------------------------
//  The angle pos * inv_freq: inv_freq = 1 / base^(2i/dim) in fp32 errs by (ln(base) + 4) u
//  relatively (the exponent's rounding scaled by ln(base), powf, the division), the product
//  by u more: dtheta = theta (ln(base) + 5) u. cos and sin then err by dtheta + 4 u each, and
//  a0 c - a1 s by (|a0| + |a1|)(dtheta + 5 u) + u |r| (products, subtraction). Copies are
//  exact. Backward: a group's key (value) gradient is a sum of qpg terms in head order,
//  qpg u times their magnitudes, carried through the rotation with the magnitudes.
struct ExpandCase {
    std::int64_t s, b, groups, qpg, hn, rotary_dim;
    bool interleaved;
};

QkvExpandArgs expand_args(const ExpandCase& k, DType t) {
    QkvExpandArgs a;
    a.s = k.s;
    a.b = k.b;
    a.groups = k.groups;
    a.heads_per_group = k.qpg;
    a.hn = k.hn;
    a.rotary_dim = k.rotary_dim;
    a.rotary_base = 10000.0f;
    a.rotary_interleaved = k.interleaved;
    a.dtype = t;
    return a;
}

// Exact rotation of elements (d, partner) of a vector with magnitudes m (for bounds).
struct Rot {
    double val, bound;
};
Rot rotate_exact(const QkvExpandArgs& a, const double* v, const double* m, std::int64_t d,
                 std::int64_t pos, double sign, double extra_rel) {
    if (d >= a.rotary_dim) return {v[d], extra_rel * m[d]};
    const std::int64_t half = a.rotary_dim / 2;
    std::int64_t pair, partner;
    bool first;
    if (a.rotary_interleaved) {
        pair = d / 2;
        first = d % 2 == 0;
        partner = first ? d + 1 : d - 1;
    } else {
        first = d < half;
        pair = first ? d : d - half;
        partner = first ? d + half : d - half;
    }
    const double theta = pos * std::pow(double(a.rotary_base), -2.0 * pair / a.rotary_dim);
    const double c = std::cos(theta), s = sign * std::sin(theta);
    const double r = first ? v[d] * c - v[partner] * s : v[d] * c + v[partner] * s;
    const double dtheta = theta * (std::log(double(a.rotary_base)) + 5.0) * kU;
    return {r, (m[d] + m[partner]) * (dtheta + 5.0 * kU + extra_rel) + kU * std::abs(r)};
}

// Rope's position of token row r (i = r / b, sample r % b): positions[sample * s + i] where
// given ([b, s], QkvExpandArgs::positions), else i.
std::int64_t row_pos(const ExpandCase& k, const std::vector<std::int32_t>& positions, std::int64_t r) {
    return positions.empty() ? r / k.b : positions[r % k.b * k.s + r / k.b];
}

// qkv_expand forward on in_v and backward on dy_v on both backends (positions, if any, in
// each one's memory), each result against its exact values (fy, gy) and bounds (fb, gb).
void expand_on_both(Backend& cpu, Backend& gpu, const QkvExpandArgs& a, const std::vector<std::int32_t>& positions,
                    const std::vector<double>& in_v, const std::vector<double>& fy, const std::vector<double>& fb,
                    std::int64_t out_n, const std::vector<double>& dy_v, const std::vector<double>& gy,
                    const std::vector<double>& gb, std::int64_t in_n) {
    const DType t = a.dtype;
    Ints pos(cpu, gpu, positions);
    QkvExpandArgs ac = a, ag = a;
    if (!positions.empty()) {
        ac.positions = pos.c();
        ag.positions = pos.g();
    }
    Twin in(cpu, gpu, t, in_v), out(cpu, gpu, t, out_n);
    cpu.qkv_expand_forward(ac, in.c(), out.c());
    gpu.qkv_expand_forward(ag, in.g(), out.g());
    EXPECT_TRUE(within_bound(out.gpu_vals(), fy, fb)) << "GPU forward";
    EXPECT_TRUE(within_bound(out.cpu_vals(), fy, fb)) << "CPU forward";
    Twin dy(cpu, gpu, t, dy_v), dg(cpu, gpu, t, in_n);
    cpu.qkv_expand_backward(ac, dy.c(), dg.c());
    gpu.qkv_expand_backward(ag, dy.g(), dg.g());
    EXPECT_TRUE(within_bound(dg.gpu_vals(), gy, gb)) << "GPU backward";
    EXPECT_TRUE(within_bound(dg.cpu_vals(), gy, gb)) << "CPU backward";
}

// qkv_expand (the expansion to [np, 3, hn]) forward and backward against the fp64 result, on
// both backends; positions as QkvExpandArgs::positions (empty: none given).
void check_qkv_expand(Backend& cpu, Backend& gpu, const ExpandCase& k, DType t,
                      const std::vector<std::int32_t>& positions = {}) {
    QkvExpandArgs a = expand_args(k, t);
    SCOPED_TRACE(dname(t) + " s=" + std::to_string(k.s) + " b=" + std::to_string(k.b) + " groups=" +
                 std::to_string(k.groups) + " qpg=" + std::to_string(k.qpg) + " hn=" + std::to_string(k.hn) +
                 " rot=" + std::to_string(k.rotary_dim) + (k.interleaved ? " interleaved" : "") +
                 (positions.empty() ? "" : " positions"));
    const std::int64_t rows = k.s * k.b, hn = k.hn, qpg = k.qpg, np = k.groups * qpg;
    const std::int64_t in_row = k.groups * (qpg + 2) * hn, out_row = np * 3 * hn;
    const auto inv = rounded(t, random_vec(rows * in_row, 60));
    const auto dyv = rounded(t, random_vec(rows * out_row, 61));
    std::vector<double> fy(rows * out_row), fb(rows * out_row), gy(rows * in_row), gb(rows * in_row);
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t pos = row_pos(k, positions, r);
        for (std::int64_t g = 0; g < k.groups; ++g) {
            const double* grp = &inv[r * in_row + g * (qpg + 2) * hn];
            std::vector<double> mag(grp, grp + (qpg + 2) * hn);
            for (double& m : mag) m = std::abs(m);
            for (std::int64_t i = 0; i < qpg; ++i)
                for (std::int64_t part = 0; part < 3; ++part) {
                    const std::int64_t src = part == 0 ? i : qpg + part - 1;
                    for (std::int64_t d = 0; d < hn; ++d) {
                        const std::int64_t o = r * out_row + ((g * qpg + i) * 3 + part) * hn + d;
                        Rot rt = part == 2 ? Rot{grp[src * hn + d], 0.0}
                                           : rotate_exact(a, grp + src * hn, mag.data() + src * hn, d, pos, 1.0, 0.0);
                        fy[o] = rt.val;
                        fb[o] = rt.bound + output_rounding(t, rt.val);
                    }
                }
            // Backward: dq rotated back; dk, dv summed over the group's heads first.
            std::vector<double> sum((qpg + 2) * hn, 0.0), sm((qpg + 2) * hn, 0.0);
            for (std::int64_t i = 0; i < qpg; ++i)
                for (std::int64_t part = 0; part < 3; ++part) {
                    const std::int64_t dst = part == 0 ? i : qpg + part - 1;
                    for (std::int64_t d = 0; d < hn; ++d) {
                        const double v = dyv[r * out_row + ((g * qpg + i) * 3 + part) * hn + d];
                        sum[dst * hn + d] += v;
                        sm[dst * hn + d] += std::abs(v);
                    }
                }
            for (std::int64_t j = 0; j < qpg + 2; ++j) {
                const double extra = j < qpg ? 0.0 : qpg * kU;
                for (std::int64_t d = 0; d < hn; ++d) {
                    const std::int64_t o = r * in_row + (g * (qpg + 2) + j) * hn + d;
                    Rot rt = j == qpg + 1 ? Rot{sum[j * hn + d], extra * sm[j * hn + d]}
                                          : rotate_exact(a, &sum[j * hn], &sm[j * hn], d, pos, -1.0, extra);
                    gy[o] = rt.val;
                    gb[o] = rt.bound + output_rounding(t, rt.val);
                }
            }
        }
    }
    expand_on_both(cpu, gpu, a, positions, inv, fy, fb, rows * out_row, dyv, gy, gb, rows * in_row);
}

TEST_F(CudaDecoderOps, QkvExpandWithRope) {
    const ExpandCase cases[] = {{5, 2, 2, 1, 8, 8, false},     // rope, no grouping
                                {7, 3, 2, 3, 64, 64, false},   // GQA + full rope
                                {4, 2, 1, 4, 16, 8, false},    // MQA + partial rope
                                {6, 1, 2, 2, 32, 32, true},    // interleaved
                                {3, 2, 3, 2, 6, 0, false},     // GQA without rope
                                {40, 1, 1, 2, 128, 128, false}};  // long positions, hn 128
    for (DType t : kAllTypes)
        for (const ExpandCase& k : cases) check_qkv_expand(cpu(), gpu(), k, t);
}

// keep_groups (what the model runs): rope on the grouped layout itself, queries and the key
// rotated, the value copied; backward rotates back (no sums: attention summed dK/dV).
void check_qkv_rope(Backend& cpu, Backend& gpu, const ExpandCase& k, DType t,
                    const std::vector<std::int32_t>& positions = {}) {
    QkvExpandArgs a = expand_args(k, t);
    a.keep_groups = true;
    SCOPED_TRACE(dname(t) + " groups=" + std::to_string(k.groups) + " qpg=" + std::to_string(k.qpg) +
                 " rot=" + std::to_string(k.rotary_dim) + (positions.empty() ? "" : " positions"));
    const std::int64_t rows = k.s * k.b, hn = k.hn, qpg = k.qpg, row = k.groups * (qpg + 2) * hn;
    const auto inv = rounded(t, random_vec(rows * row, 62));
    const auto dyv = rounded(t, random_vec(rows * row, 63));
    std::vector<double> fy(rows * row), fb(rows * row), gy(rows * row), gb(rows * row);
    for (int dir = 0; dir < 2; ++dir) {
        const auto& src = dir == 0 ? inv : dyv;
        auto& y = dir == 0 ? fy : gy;
        auto& b = dir == 0 ? fb : gb;
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t v = 0; v < k.groups * (qpg + 2); ++v) {
                const double* x = &src[r * row + v * hn];
                std::vector<double> mag(x, x + hn);
                for (double& m : mag) m = std::abs(m);
                for (std::int64_t d = 0; d < hn; ++d) {
                    const Rot rt = v % (qpg + 2) == qpg + 1
                                       ? Rot{x[d], 0.0}
                                       : rotate_exact(a, x, mag.data(), d, row_pos(k, positions, r),
                                                      dir == 0 ? 1.0 : -1.0, 0.0);
                    y[r * row + v * hn + d] = rt.val;
                    b[r * row + v * hn + d] = rt.bound + output_rounding(t, rt.val);
                }
            }
    }
    expand_on_both(cpu, gpu, a, positions, inv, fy, fb, rows * row, dyv, gy, gb, rows * row);
}

TEST_F(CudaDecoderOps, QkvRopeKeepsGroups) {
    const ExpandCase cases[] = {{7, 3, 2, 3, 64, 64, false}, {4, 2, 1, 4, 16, 8, false}, {6, 1, 2, 2, 32, 32, true}};
    for (DType t : kAllTypes)
        for (const ExpandCase& k : cases) check_qkv_rope(cpu(), gpu(), k, t);
}

// Rope at given positions (QkvExpandArgs::positions, Megatron's position_ids under
// --reset-position-ids): each sample's positions restart at its documents' first tokens,
// at different tokens per sample, so a kernel that keeps position r / b, reads the [b, s]
// array as [s, b] or takes another sample's positions is far outside the bounds; and a
// permutation of positions up to 4 s, where a kernel off by one row also shows. Both the
// expansion and the grouped layout (keep_groups), forward and backward, grouped heads.
TEST_F(CudaDecoderOps, QkvExpandAtPositions) {
    // Per sample, its documents' first positions.
    auto reset = [](std::int64_t s, const std::vector<std::vector<std::int32_t>>& starts) {
        std::vector<std::int32_t> pos;
        for (const auto& st : starts)
            for (std::int64_t i = 0, d = 0; i < s; ++i) {
                while (d + 1 < static_cast<std::int64_t>(st.size()) && st[d + 1] <= i) ++d;
                pos.push_back(static_cast<std::int32_t>(i - st[d]));
            }
        return pos;
    };
    std::vector<std::int32_t> scattered(2 * 9);
    for (std::int64_t e = 0; e < 2 * 9; ++e) scattered[e] = static_cast<std::int32_t>((e * 7 + 3) % 36);
    const ExpandCase grouped{9, 2, 2, 2, 64, 64, false}, interleaved{9, 2, 1, 3, 32, 32, true};
    const ExpandCase partial{9, 2, 2, 1, 16, 8, false};
    for (DType t : kAllTypes) {
        const auto docs = reset(9, {{0, 4, 5}, {0, 2, 7}});
        check_qkv_expand(cpu(), gpu(), grouped, t, docs);
        check_qkv_expand(cpu(), gpu(), partial, t, scattered);
        check_qkv_rope(cpu(), gpu(), interleaved, t, docs);
        check_qkv_rope(cpu(), gpu(), grouped, t, scattered);
    }
}

// Bad shapes are our own bug, not the user's: the checks above every device (checked_ops.cpp)
// raise InternalError on the CUDA backend as on the CPU backend.
TEST_F(CudaDecoderOps, BadShapesAreRefused) {
    QkvExpandArgs a;
    a.s = 2;
    a.b = 1;
    a.groups = 1;
    a.hn = 8;
    a.rotary_dim = 10;  // above hn
    EXPECT_THROW(gpu().qkv_expand_forward(a, nullptr, nullptr), InternalError);
    a.rotary_dim = 3;  // odd
    EXPECT_THROW(gpu().qkv_expand_backward(a, nullptr, nullptr), InternalError);
    EXPECT_THROW(gpu().rmsnorm_forward(nullptr, nullptr, nullptr, nullptr, 4, 0, 1e-5f, DType::F32), InternalError);
    EXPECT_THROW(gpu().swiglu_forward(nullptr, nullptr, -1, 8, DType::F32), InternalError);
}

}  // namespace
}  // namespace gpt::test
