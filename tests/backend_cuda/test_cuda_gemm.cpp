// CUDA GEMM (cuBLASLt) vs CPU GEMM: transposes, padded leading dimensions, mixed output
// types with beta (weight-gradient accumulation), bias, bias+GELU (erf, and tanh through
// cuBLASLt's GELU_AUX_BIAS), GELU-gradient (DGELU) and fused bias-gradient epilogues, batches;
// the epilogues both fused into cuBLASLt and unfused (GPT_CUDA_GEMM_EPILOGUE), and the two
// against each other; the autotuned algorithm choice (GPT_CUDA_GEMM_ALGO=autotune).
#include <cmath>
#include <functional>
#include <utility>

#include "backend/cuda/gemm_algo.hpp"
#include "backend/cuda/gemm_epilogue.hpp"
#include "cuda_test_util.hpp"

#if defined(GPT_CUDA_EMU)
#include <gpt_emu/matmul_log.hpp>
#endif

namespace gpt::test {
namespace {

class CudaGemm : public CudaVsCpu {};

using cuda::GemmEpilogueMode;

// Sets the epilogue mode for a scope and restores the previous one.
class EpilogueModeGuard {
public:
    explicit EpilogueModeGuard(GemmEpilogueMode m) : old_(cuda::gemm_epilogue_mode()) {
        cuda::set_gemm_epilogue_mode(m);
    }
    ~EpilogueModeGuard() { cuda::set_gemm_epilogue_mode(old_); }
    EpilogueModeGuard(const EpilogueModeGuard&) = delete;
    EpilogueModeGuard& operator=(const EpilogueModeGuard&) = delete;

private:
    GemmEpilogueMode old_;
};

// Runs f once with cuBLASLt's fused epilogues and once with ours unfused.
void for_each_epilogue_mode(const std::function<void()>& f) {
    for (GemmEpilogueMode m : {GemmEpilogueMode::Fused, GemmEpilogueMode::Unfused}) {
        SCOPED_TRACE(std::string("epilogue ") + cuda::gemm_epilogue_mode_name(m));
        EpilogueModeGuard guard(m);
        f();
    }
}

struct Case {
    std::int64_t m, n, k;
    bool ta, tb;
    DType dtype, c_dtype;
    std::int64_t batch;
    GemmEpilogue epi;
    bool tanh_gelu;
    float beta;
    std::int64_t pad;  // added to every leading dimension
    bool bias_grad = false;  // fused dbias += column sums of A (weight-gradient GEMMs)
};

std::string describe(const Case& c) {
    return detail::concat("m=", c.m, " n=", c.n, " k=", c.k, " ta=", c.ta, " tb=", c.tb, " ",
                          dname(c.dtype), "->", dname(c.c_dtype), " batch=", c.batch,
                          " epi=", static_cast<int>(c.epi), c.tanh_gelu ? " tanh" : "",
                          " beta=", c.beta, " pad=", c.pad, c.bias_grad ? " bias_grad" : "");
}

// fp64 GELU and its derivative (erf form, or the tanh approximation).
double gelu64(double x, bool tanh_form) {
    if (!tanh_form) return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    const double c = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}
double gelu64_grad(double x, bool tanh_form) {
    if (!tanh_form)
        return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
    const double c = std::sqrt(2.0 / M_PI), t = std::tanh(c * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

// The error bound, from the fp64 product of the same rounded inputs (u = unit roundoff):
//  - fp16/bf16 products are exact in fp32 (at most 2 x 11 significant bits); fp32 products
//    round once. Summing k products in fp32 in any order (the library's blocking, split-k,
//    the tensor cores' tree) errs by at most gamma_k * sum|a_i b_i|, gamma_k = k u/(1 - k u)
//    (Higham, Accuracy and Stability, eq. 3.5). alpha, beta*C and the bias add three more
//    operations on these terms: gamma_{k+3} * (|alpha| sum|a_i b_i| + |beta C| + |bias|).
//  - c = 2: 2 (k+3) u32 >= gamma_{k+3} while (k+3) u32 <= 1/2, and it also covers tensor
//    cores whose fp32 adders truncate (error below 2u per operation, not u).
//  - The result is rounded to C's type: u_out |exact| (+ u_out * the accumulation error,
//    second order, and fp16's underflow near 0).
//  - BiasGelu: C = gelu(pre), from the fp32 pre-activation or from its copy rounded to C's
//    type; |gelu'| <= 1.13, and fp32 erff/tanhf/expf err by a few ulps, bounded by
//    8 u32 (|pre| + 1) on gelu's value.
//  - GeluGrad: C = product * gelu'(aux), the product possibly rounded to C's type first;
//    the same 8 u32 on gelu'(aux) (|gelu'| <= 1.13).
//  - Bias gradient: dbias + k column entries summed in fp32: 2 (k+1) u32 (|dbias| + sum|a|).
// A wrong element (a transposed operand, a missing alpha, a shifted row) is off by O(|C|),
// orders of magnitude beyond this: GemmBoundsRejectWrongResults checks that they fail.
struct GemmBound {
    std::vector<double> c, c_bound, aux, aux_bound, dbias, dbias_bound;
};

constexpr double kGeluSlope = 1.13;  // max |gelu'(x)| (both forms: 1.129 at x ~ 1.4)

GemmBound exact_gemm(const GemmArgs& g, const std::vector<double>& A, const std::vector<double>& B,
                     const std::vector<double>& C0, const std::vector<double>& bias,
                     const std::vector<double>& aux0, const std::vector<double>& dbias0,
                     bool bias_grad) {
    const double u32 = unit_roundoff(DType::F32), uo = unit_roundoff(g.c_dtype);
    const double acc = 2.0 * static_cast<double>(g.k + 3) * u32;
    GemmBound r;
    const bool biased = g.epilogue == GemmEpilogue::Bias || g.epilogue == GemmEpilogue::BiasGelu;
    for (std::int64_t t = 0; t < g.batch; ++t)
        for (std::int64_t i = 0; i < g.m; ++i)
            for (std::int64_t j = 0; j < g.n; ++j) {
                double dot = 0.0, mag = 0.0;
                for (std::int64_t p = 0; p < g.k; ++p) {
                    const double a = A[t * g.stride_a + (g.trans_a ? p * g.lda + i : i * g.lda + p)];
                    const double b = B[t * g.stride_b + (g.trans_b ? j * g.ldb + p : p * g.ldb + j)];
                    dot += a * b;
                    mag += std::abs(a * b);
                }
                const std::size_t ci = t * g.stride_c + i * g.ldc + j;
                double e = g.alpha * dot, m = std::abs(g.alpha) * mag;
                if (g.beta != 0.0f) {
                    e += g.beta * C0[ci];
                    m += std::abs(g.beta * C0[ci]);
                }
                if (biased) {
                    e += bias[j];
                    m += std::abs(bias[j]);
                }
                const double err = acc * m * (1.0 + uo);
                if (g.epilogue == GemmEpilogue::BiasGelu) {
                    const double y = gelu64(e, g.tanh_gelu);
                    r.aux.push_back(e);
                    r.aux_bound.push_back(output_rounding(g.c_dtype, e) + err);
                    r.c.push_back(y);
                    r.c_bound.push_back(output_rounding(g.c_dtype, y) +
                                        kGeluSlope * (err + output_rounding(g.c_dtype, e)) +
                                        8.0 * u32 * (std::abs(e) + 1.0));
                } else if (g.epilogue == GemmEpilogue::GeluGrad) {
                    const double x = aux0[ci], d = gelu64_grad(x, g.tanh_gelu), y = e * d;
                    r.c.push_back(y);
                    r.c_bound.push_back(output_rounding(g.c_dtype, y) +
                                        kGeluSlope * (err + output_rounding(g.c_dtype, e)) +
                                        8.0 * u32 * std::abs(e));
                } else {
                    r.c.push_back(e);
                    r.c_bound.push_back(output_rounding(g.c_dtype, e) + err);
                }
            }
    if (bias_grad)
        for (std::int64_t i = 0; i < g.m; ++i) {
            double s = dbias0[i], m = std::abs(dbias0[i]);
            for (std::int64_t p = 0; p < g.k; ++p) {
                s += A[p * g.lda + i];
                m += std::abs(A[p * g.lda + i]);
            }
            r.dbias.push_back(s);
            r.dbias_bound.push_back(2.0 * static_cast<double>(g.k + 1) * u32 * m);
        }
    return r;
}

// The m x n blocks of C's batches, without the padding columns.
std::vector<double> c_blocks(const GemmArgs& g, const std::vector<double>& v) {
    std::vector<double> out;
    for (std::int64_t t = 0; t < g.batch; ++t)
        for (std::int64_t i = 0; i < g.m; ++i)
            for (std::int64_t j = 0; j < g.n; ++j) out.push_back(v[t * g.stride_c + i * g.ldc + j]);
    return out;
}

GemmArgs make_args(const Case& c) {
    const std::int64_t a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k;
    const std::int64_t b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n;
    GemmArgs g;
    g.trans_a = c.ta;
    g.trans_b = c.tb;
    g.m = c.m;
    g.n = c.n;
    g.k = c.k;
    g.lda = a_cols + c.pad;
    g.ldb = b_cols + c.pad;
    g.ldc = c.n + c.pad;
    g.alpha = 0.75f;
    g.beta = c.beta;
    g.dtype = c.dtype;
    g.c_dtype = c.c_dtype;
    g.batch = c.batch;
    g.stride_a = a_rows * g.lda;
    g.stride_b = b_rows * g.ldb;
    g.stride_c = c.m * g.ldc;
    g.epilogue = c.epi;
    g.tanh_gelu = c.tanh_gelu;
    return g;
}

// Runs the case on both backends; each result must lie within the error bound of the fp64
// product of the same rounded inputs. Returns the GPU's C blocks and the bound.
std::pair<std::vector<double>, GemmBound> run_case(Backend& cpu, Backend& gpu, const Case& c) {
    SCOPED_TRACE(describe(c));
    const GemmArgs g = make_args(c);
    const auto av = rounded(c.dtype, random_vec(g.stride_a * c.batch, 70));
    const auto bv = rounded(c.dtype, random_vec(g.stride_b * c.batch, 71));
    const auto cv = rounded(c.c_dtype, random_vec(g.stride_c * c.batch, 72));
    const auto biasv = rounded(c.dtype, random_vec(c.n, 73));
    // The pre-activation: written by BiasGelu, read by GeluGrad.
    const auto auxv = rounded(c.c_dtype, random_vec(g.stride_c * c.batch, 75, -3.0, 3.0));
    const auto dbiasv = random_vec(c.m, 74);  // fp32, accumulated into
    Twin A(cpu, gpu, c.dtype, av), B(cpu, gpu, c.dtype, bv), C(cpu, gpu, c.c_dtype, cv);
    Twin bias(cpu, gpu, c.dtype, biasv), aux(cpu, gpu, c.c_dtype, auxv);
    Twin dbias(cpu, gpu, DType::F32, dbiasv);
    auto call = [&](Backend& be, bool on_gpu) {
        GemmArgs x = g;
        x.a = on_gpu ? A.g() : A.c();
        x.b = on_gpu ? B.g() : B.c();
        x.c = on_gpu ? C.g() : C.c();
        const bool biased = c.epi == GemmEpilogue::Bias || c.epi == GemmEpilogue::BiasGelu;
        x.bias = biased ? (on_gpu ? bias.g() : bias.c()) : nullptr;
        const bool gelu = c.epi == GemmEpilogue::BiasGelu || c.epi == GemmEpilogue::GeluGrad;
        x.aux = gelu ? (on_gpu ? aux.g() : aux.c()) : nullptr;
        x.bias_grad = c.bias_grad ? (on_gpu ? dbias.gf() : dbias.cf()) : nullptr;
        be.gemm(x);
    };
    call(cpu, false);
    call(gpu, true);
    GemmBound want = exact_gemm(g, av, bv, cv, biasv, auxv, rounded(DType::F32, dbiasv), c.bias_grad);
    auto got = c_blocks(g, C.gpu_vals());
    EXPECT_TRUE(within_bound(got, want.c, want.c_bound)) << "GPU";
    EXPECT_TRUE(within_bound(c_blocks(g, C.cpu_vals()), want.c, want.c_bound)) << "CPU";
    if (c.epi == GemmEpilogue::BiasGelu) {
        EXPECT_TRUE(within_bound(c_blocks(g, aux.gpu_vals()), want.aux, want.aux_bound)) << "GPU";
        EXPECT_TRUE(within_bound(c_blocks(g, aux.cpu_vals()), want.aux, want.aux_bound)) << "CPU";
    }
    if (c.bias_grad) {
        EXPECT_TRUE(within_bound(dbias.gpu_vals(), want.dbias, want.dbias_bound)) << "GPU";
        EXPECT_TRUE(within_bound(dbias.cpu_vals(), want.dbias, want.dbias_bound)) << "CPU";
    }
    return {std::move(got), std::move(want)};
}

TEST_F(CudaGemm, PlainAllTransposesAndTypes) {
    const std::int64_t shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {64, 96, 128}, {257, 130, 511}};
    for (auto& s : shapes)
        for (DType t : kAllTypes)
            for (int tr = 0; tr < 4; ++tr)
                run_case(cpu(), gpu(), Case{s[0], s[1], s[2], (tr & 1) != 0, (tr & 2) != 0, t, t, 1,
                                            GemmEpilogue::None, false, 0.0f, 0});
}

TEST_F(CudaGemm, PaddedLeadingDimensions) {
    for (DType t : kAllTypes)
        for (int tr = 0; tr < 4; ++tr)
            run_case(cpu(), gpu(), Case{96, 80, 64, (tr & 1) != 0, (tr & 2) != 0, t, t, 1,
                                        GemmEpilogue::None, false, 0.0f, 8});
}

TEST_F(CudaGemm, Fp32OutputAccumulates) {
    // Weight gradients: 16-bit operands, fp32 C, beta = 1 (C += dY^T X).
    for (DType t : kAllTypes)
        run_case(cpu(), gpu(), Case{128, 192, 256, true, false, t, DType::F32, 1,
                                    GemmEpilogue::None, false, 1.0f, 0});
    run_case(cpu(), gpu(), Case{64, 64, 64, false, true, DType::F16, DType::F16, 1,
                                GemmEpilogue::None, false, 0.5f, 0});
}

TEST_F(CudaGemm, BiasAndGeluEpilogues) {
    for_each_epilogue_mode([&] {
        for (DType t : kAllTypes)
            for (bool tb : {false, true}) {
                run_case(cpu(), gpu(), Case{100, 192, 64, false, tb, t, t, 1, GemmEpilogue::Bias, false, 0.0f, 0});
                run_case(cpu(), gpu(), Case{100, 192, 64, false, tb, t, t, 1, GemmEpilogue::BiasGelu, false, 0.0f, 0});
                run_case(cpu(), gpu(), Case{100, 192, 64, false, tb, t, t, 1, GemmEpilogue::BiasGelu, true, 0.0f, 0});
            }
        // Bias of the operands' type with an fp32 output; a row length that takes the
        // element-by-element GELU pass (37 is no multiple of a 16-byte pack).
        run_case(cpu(), gpu(), Case{33, 64, 32, false, true, DType::BF16, DType::F32, 1, GemmEpilogue::Bias, false, 0.0f, 0});
        run_case(cpu(), gpu(), Case{33, 37, 32, false, true, DType::F16, DType::F16, 1, GemmEpilogue::BiasGelu, true, 0.0f, 0});
    });
}

// The MLP's input gradient through its GELU: cuBLASLt's DGELU epilogue for the tanh GELU
// (n a multiple of 8), else the product and then GELU's backward.
TEST_F(CudaGemm, GeluGradientEpilogue) {
    for_each_epilogue_mode([&] {
        for (DType t : kAllTypes)
            for (bool tanh_gelu : {false, true}) {
                run_case(cpu(), gpu(), Case{100, 192, 64, false, false, t, t, 1, GemmEpilogue::GeluGrad, tanh_gelu, 0.0f, 0});
                run_case(cpu(), gpu(), Case{37, 60, 48, false, false, t, t, 1, GemmEpilogue::GeluGrad, tanh_gelu, 0.0f, 0});
            }
    });
}

// The weight-gradient GEMM with the bias gradient fused (cuBLASLt's BGRADB epilogue, or the
// separate column sums where the library has no algorithm for it).
TEST_F(CudaGemm, FusedBiasGradient) {
    for_each_epilogue_mode([&] {
        for (DType t : kAllTypes) {
            run_case(cpu(), gpu(), Case{128, 192, 256, true, false, t, DType::F32, 1,
                                        GemmEpilogue::None, false, 1.0f, 0, true});
            run_case(cpu(), gpu(), Case{100, 72, 37, true, false, t, DType::F32, 1,
                                        GemmEpilogue::None, false, 1.0f, 0, true});
        }
        // With another epilogue the column sums are computed on their own.
        run_case(cpu(), gpu(), Case{64, 48, 32, true, false, DType::F16, DType::F16, 1,
                                    GemmEpilogue::Bias, false, 0.0f, 0, true});
    });
}

TEST_F(CudaGemm, StridedBatches) {
    for (DType t : kAllTypes)
        for (int tr = 0; tr < 4; ++tr)
            run_case(cpu(), gpu(), Case{48, 40, 64, (tr & 1) != 0, (tr & 2) != 0, t, t, 5,
                                        GemmEpilogue::None, false, 0.0f, 0});
    for_each_epilogue_mode([&] {
        // Padded rows: the strided GELU pass per batch; contiguous batches: one pass.
        run_case(cpu(), gpu(), Case{48, 40, 64, false, false, DType::F16, DType::F16, 3,
                                    GemmEpilogue::BiasGelu, false, 0.0f, 8});
        run_case(cpu(), gpu(), Case{48, 40, 64, false, false, DType::BF16, DType::BF16, 3,
                                    GemmEpilogue::BiasGelu, true, 0.0f, 0});
    });
}

// GPT_CUDA_GEMM_EPILOGUE=fused against unfused on the same operands: the same math with the
// GELU applied at a different rounding point, so the two must agree to within that point's
// error, which is far tighter than each one's distance to the exact product (u_o: unit
// roundoff of C's type, und its underflow error, s = 1.13 >= max |gelu'| + 8 u32):
//  - Bias + GELU: fused C_f = fl(G(p)) from the fp32 pre-activation p, with aux_f = fl(p);
//    unfused C_u = fl(G(aux_u)), aux_u = fl(p') from its own GEMM (the library may pick
//    another algorithm: p' may differ from p by the accumulation error, seen in aux).
//    G errs by at most 8 u32 (|x| + 1) in fp32 (as above), so
//    |C_f - C_u| <= u_o/(1-u_o) (|C_f| + |C_u|) + 2 und
//                 + s (u_o/(1-u_o) |aux_f| + und + |aux_f - aux_u|) + 8 u32 (|aux_f| + |aux_u| + 2).
//  - GELU gradient: fused C_f = fl(p D), unfused C_u = fl(fl(p') D), D = gelu'(aux) within
//    8 u32 each, p and p' within err (the accumulation bound above) of the exact product e:
//    |C_f - C_u| <= u_o/(1-u_o) (|C_f| + |C_u|) + 2 und + s (2 err + u_o (|e| + err) + und)
//                 + 16 u32 (|e| + err) (1 + u_o) + 2 u32 s (|e| + err) (1 + u_o)  (fp32 products).
//  - Bias gradient: both within 2 (k+1) u32 (|dbias| + sum|a|) of the exact sums: twice that.
// A wrong GELU constant in the unfused kernel (0.044715 -> 0.0447) moves an fp32 C by ~1e-5
// relative, 100x this bound; bf16 results must differ in some element, which shows the
// two paths really are different code.
struct ModeRun {
    std::vector<double> c, aux, dbias;
};

TEST_F(CudaGemm, FusedAndUnfusedEpiloguesAgree) {
    const double u32 = unit_roundoff(DType::F32), s = kGeluSlope;
    for (DType t : kAllTypes)
        for (GemmEpilogue epi : {GemmEpilogue::BiasGelu, GemmEpilogue::GeluGrad, GemmEpilogue::None}) {
            const bool dbias = epi == GemmEpilogue::None;
            // Shapes the fused epilogues take (tanh GELU, n a multiple of 8, batch 1).
            const Case c = dbias ? Case{128, 192, 256, true, false, t, DType::F32, 1, epi, false, 1.0f, 0, true}
                                 : Case{100, 192, 64, false, false, t, t, 1, epi, true, 0.0f, 0};
            SCOPED_TRACE(describe(c));
            const GemmArgs g = make_args(c);
            const auto av = rounded(c.dtype, random_vec(g.stride_a, 80));
            const auto bv = rounded(c.dtype, random_vec(g.stride_b, 81));
            const auto cv = rounded(c.c_dtype, random_vec(g.stride_c, 82));
            const auto biasv = rounded(c.dtype, random_vec(c.n, 83));
            const auto auxv = rounded(c.c_dtype, random_vec(g.stride_c, 85, -3.0, 3.0));
            const auto dbiasv = rounded(DType::F32, random_vec(c.m, 84));
            auto run = [&](GemmEpilogueMode m) {
                EpilogueModeGuard guard(m);
                Twin A(cpu(), gpu(), c.dtype, av), B(cpu(), gpu(), c.dtype, bv), C(cpu(), gpu(), c.c_dtype, cv);
                Twin bias(cpu(), gpu(), c.dtype, biasv), aux(cpu(), gpu(), c.c_dtype, auxv);
                Twin db(cpu(), gpu(), DType::F32, dbiasv);
                GemmArgs x = g;
                x.a = A.g();
                x.b = B.g();
                x.c = C.g();
                x.bias = epi == GemmEpilogue::BiasGelu ? bias.g() : nullptr;
                x.aux = dbias ? nullptr : aux.g();
                x.bias_grad = dbias ? db.gf() : nullptr;
                gpu().gemm(x);
                return ModeRun{C.gpu_vals(), aux.gpu_vals(), db.gpu_vals()};
            };
            const ModeRun f = run(GemmEpilogueMode::Fused), un = run(GemmEpilogueMode::Unfused);
            const double uo = unit_roundoff(c.c_dtype), ur = uo / (1.0 - uo), und = underflow_error(c.c_dtype);
            std::vector<double> bound(f.c.size());
            if (epi == GemmEpilogue::BiasGelu) {
                for (std::size_t i = 0; i < bound.size(); ++i)
                    bound[i] = ur * (std::abs(f.c[i]) + std::abs(un.c[i])) + 2.0 * und +
                               s * (ur * std::abs(f.aux[i]) + und + std::abs(f.aux[i] - un.aux[i])) +
                               8.0 * u32 * (std::abs(f.aux[i]) + std::abs(un.aux[i]) + 2.0);
                // The pre-activations: each within its bound of the exact one.
                const GemmBound want = exact_gemm(g, av, bv, cv, biasv, auxv, dbiasv, false);
                EXPECT_TRUE(within_bound(c_blocks(g, f.aux), want.aux, want.aux_bound)) << "fused aux";
                EXPECT_TRUE(within_bound(c_blocks(g, un.aux), want.aux, want.aux_bound)) << "unfused aux";
            } else {
                GemmArgs plain = g;
                plain.epilogue = GemmEpilogue::None;
                const GemmBound prod = exact_gemm(plain, av, bv, cv, {}, {}, dbiasv, dbias);
                for (std::size_t i = 0; i < bound.size(); ++i) {
                    if (dbias) {  // no epilogue on C: the same GEMM in both modes
                        bound[i] = 2.0 * prod.c_bound[i];
                        continue;
                    }
                    const double e = std::abs(prod.c[i]);
                    const double err = prod.c_bound[i] - output_rounding(c.c_dtype, prod.c[i]);
                    bound[i] = ur * (std::abs(f.c[i]) + std::abs(un.c[i])) + 2.0 * und +
                               s * (2.0 * err + uo * (e + err) + und) +
                               (16.0 * u32 + 2.0 * u32 * s) * (e + err) * (1.0 + uo);
                }
                if (dbias) {
                    std::vector<double> dbound(prod.dbias_bound);
                    for (double& b : dbound) b *= 2.0;
                    EXPECT_TRUE(within_bound(un.dbias, f.dbias, dbound)) << "bias gradients";
                }
            }
            EXPECT_TRUE(within_bound(c_blocks(g, un.c), c_blocks(g, f.c), c_blocks(g, bound)))
                << "unfused against fused";
            if (t == DType::BF16 && epi == GemmEpilogue::BiasGelu) {
                EXPECT_NE(f.c, un.c) << "bf16 fused and unfused GELU are bit-identical: the switch chose the same path";
            }
        }
}

// The bounds can fail: wrong results of the kind a real bug gives lie far outside them, for
// every type (bf16's looser output rounding included) at the largest k.
TEST_F(CudaGemm, GemmBoundsRejectWrongResults) {
    for (DType t : kAllTypes) {
        SCOPED_TRACE(dname(t));
        const Case c{64, 64, 511, false, false, t, t, 1, GemmEpilogue::None, false, 0.0f, 0};
        auto [got, want] = run_case(cpu(), gpu(), c);
        ASSERT_TRUE(within_bound(got, want.c, want.c_bound));
        // A missing alpha.
        std::vector<double> wrong = got;
        for (double& x : wrong) x /= 0.75;
        EXPECT_FALSE(within_bound(wrong, want.c, want.c_bound)) << "missing alpha";
        // Off by one row.
        for (std::int64_t i = 0; i + 1 < c.m; ++i)
            for (std::int64_t j = 0; j < c.n; ++j) wrong[i * c.n + j] = got[(i + 1) * c.n + j];
        for (std::int64_t j = 0; j < c.n; ++j) wrong[(c.m - 1) * c.n + j] = got[j];
        EXPECT_FALSE(within_bound(wrong, want.c, want.c_bound)) << "rows shifted by one";
        // The GPU run with A's transpose flag flipped (square A: the call is valid).
        Case flipped = c;
        flipped.k = c.m;
        const GemmArgs g = make_args(flipped);
        const auto av = rounded(t, random_vec(g.stride_a, 70)), bv = rounded(t, random_vec(g.stride_b, 71));
        Twin A(cpu(), gpu(), t, av), B(cpu(), gpu(), t, bv), C(cpu(), gpu(), t, g.stride_c);
        GemmArgs x = g;
        x.trans_a = true;
        x.a = A.g();
        x.b = B.g();
        x.c = C.g();
        gpu().gemm(x);
        const GemmBound right = exact_gemm(g, av, bv, {}, {}, {}, {}, false);
        EXPECT_FALSE(within_bound(c_blocks(g, C.gpu_vals()), right.c, right.c_bound)) << "A transposed";
        // All zeros (the old tolerance let bf16 pass them at this k).
        EXPECT_FALSE(within_bound(std::vector<double>(got.size(), 0.0), want.c, want.c_bound)) << "zeros";
    }
}

TEST_F(CudaGemm, RejectsBadArguments) {
    Twin x(cpu(), gpu(), DType::F32, 16);
    GemmArgs g;
    g.m = g.n = g.k = 4;
    g.lda = g.ldb = g.ldc = 4;
    g.a = g.b = g.c = x.g();
    g.epilogue = GemmEpilogue::Bias;  // without a bias
    EXPECT_THROW(gpu().gemm(g), InternalError);
    g.epilogue = GemmEpilogue::None;
    g.lda = 2;
    EXPECT_THROW(gpu().gemm(g), InternalError);
    g.lda = 4;
    g.bias_grad = x.gf();  // op(A) must be A^T for a fused bias gradient
    EXPECT_THROW(gpu().gemm(g), InternalError);
    g.bias_grad = nullptr;
    g.epilogue = GemmEpilogue::GeluGrad;  // without the pre-activation
    EXPECT_THROW(gpu().gemm(g), InternalError);
    g.aux = x.g();
    g.ldc = 8;  // C must be contiguous
    EXPECT_THROW(gpu().gemm(g), InternalError);
}

#if defined(GPT_CUDA_EMU)
// GPT_CUDA_GEMM_ALGO=autotune (gemm_algo.hpp) on the emulator, whose heuristic offers
// gpt_emu::kMatmulAlgos algorithms of one arithmetic, given costs here (the emulator waits
// that long inside cublasLtMatmul, between the engine's events): 30 ms a call, 60 ms a call,
// and for the second 90, 0 and then 90 ms again, a first launch's load and a later hiccup
// around its true speed, so only the least of its rounds makes it the fastest. The shape's
// first kMatmulAlgos x kGemmTuneRounds calls must run the candidates round-robin, every later
// call the second; the heuristic mode the first answer always. Weight-gradient
// accumulation (fp32 C, beta = 1) makes each call add its product to C, so a tuning call
// that computed nothing, computed twice or wrote elsewhere shows against the heuristic run.
TEST_F(CudaGemm, AutotuneRunsEachCandidateThenTheFastest) {
    struct Restore {
        bool old = cuda::gemm_autotune();
        ~Restore() {
            cuda::set_gemm_autotune(old);
            gpt_emu::set_matmul_algo_costs_ms({});
        }
    } restore;
    static_assert(gpt_emu::kMatmulAlgos == 3 && cuda::kGemmTuneCandidates >= 3);
    const Case c{48, 40, 64, true, false, DType::BF16, DType::F32, 1, GemmEpilogue::None, false, 1.0f, 0};
    GemmArgs g = make_args(c);
    Twin a(cpu(), gpu(), c.dtype, rounded(c.dtype, random_vec(g.stride_a, 80)));
    Twin b(cpu(), gpu(), c.dtype, rounded(c.dtype, random_vec(g.stride_b, 81)));
    const int tuning = gpt_emu::kMatmulAlgos * cuda::kGemmTuneRounds, calls = tuning + 2;
    std::vector<double> sums[2];
    for (const bool tune : {false, true}) {
        SCOPED_TRACE(tune ? "autotune" : "heuristic");
        cuda::set_gemm_autotune(tune);
        gpt_emu::set_matmul_algo_costs_ms({{30.0}, {90.0, 0.0, 90.0}, {60.0}});
        Twin out(cpu(), gpu(), DType::F32, std::vector<double>(static_cast<std::size_t>(g.stride_c), 0.0));
        g.a = a.g();
        g.b = b.g();
        g.c = out.g();
        gpt_emu::clear_matmul_calls();
        for (int i = 0; i < calls; ++i) gpu().gemm(g);
        sums[tune] = out.gpu_vals();
        std::vector<int> ran, want;
        for (const gpt_emu::MatmulCall& m : gpt_emu::matmul_calls()) ran.push_back(m.algo);
        for (int i = 0; i < calls; ++i) want.push_back(!tune ? 0 : i < tuning ? i % gpt_emu::kMatmulAlgos : 1);
        EXPECT_EQ(ran, want);
        EXPECT_NE(gpu().kernel_variants().find(tune ? "gemm_algo=autotune" : "gemm_algo=heuristic"), std::string::npos)
            << gpu().kernel_variants();
    }
    EXPECT_EQ(sums[1], sums[0]) << "every autotuned call computes its own product, once";
}
#endif

}  // namespace
}  // namespace gpt::test
