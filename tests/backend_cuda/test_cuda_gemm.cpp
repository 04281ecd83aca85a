// CUDA GEMM (cuBLASLt) vs CPU GEMM: transposes, padded leading dimensions, mixed output
// types with beta (weight-gradient accumulation), bias, bias+GELU (erf, and tanh through
// cuBLASLt's GELU_AUX_BIAS), GELU-gradient (DGELU) and fused bias-gradient epilogues, batches.
#include <cmath>

#include "cuda_test_util.hpp"

namespace gpt::test {
namespace {

class CudaGemm : public CudaVsCpu {};

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

void run_case(Backend& cpu, Backend& gpu, const Case& c) {
    SCOPED_TRACE(describe(c));
    const std::int64_t a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k;
    const std::int64_t b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n;
    const std::int64_t lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.n + c.pad;
    const std::int64_t sa = a_rows * lda, sb = b_rows * ldb, sc = c.m * ldc;
    Twin A(cpu, gpu, c.dtype, random_vec(sa * c.batch, 70));
    Twin B(cpu, gpu, c.dtype, random_vec(sb * c.batch, 71));
    Twin C(cpu, gpu, c.c_dtype, random_vec(sc * c.batch, 72));
    Twin bias(cpu, gpu, c.dtype, random_vec(c.n, 73));
    // The pre-activation: written by BiasGelu, read by GeluGrad.
    Twin aux(cpu, gpu, c.c_dtype, random_vec(sc * c.batch, 75, -3.0, 3.0));
    Twin dbias(cpu, gpu, DType::F32, random_vec(c.m, 74));  // accumulated into
    GemmArgs g;
    g.trans_a = c.ta;
    g.trans_b = c.tb;
    g.m = c.m;
    g.n = c.n;
    g.k = c.k;
    g.lda = lda;
    g.ldb = ldb;
    g.ldc = ldc;
    g.alpha = 0.75f;
    g.beta = c.beta;
    g.dtype = c.dtype;
    g.c_dtype = c.c_dtype;
    g.batch = c.batch;
    g.stride_a = sa;
    g.stride_b = sb;
    g.stride_c = sc;
    g.epilogue = c.epi;
    g.tanh_gelu = c.tanh_gelu;
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
    // Different summation orders: error grows like sqrt(k) times the fp32 rounding; a wrong
    // element is off by O(1).
    const Tol tol = tol_for(c.c_dtype, std::max(1.0, 2.0 * std::sqrt(static_cast<double>(c.k))));
    // Padding columns of C are not part of the product: only compare the m x n blocks.
    auto block = [&](const std::vector<double>& v) {
        std::vector<double> out;
        for (std::int64_t t = 0; t < c.batch; ++t)
            for (std::int64_t i = 0; i < c.m; ++i)
                for (std::int64_t j = 0; j < c.n; ++j) out.push_back(v[t * sc + i * ldc + j]);
        return out;
    };
    EXPECT_TRUE(all_close(block(C.gpu_vals()), block(C.cpu_vals()), tol));
    if (c.epi == GemmEpilogue::BiasGelu) {
        EXPECT_TRUE(all_close(block(aux.gpu_vals()), block(aux.cpu_vals()), tol));
    }
    if (c.bias_grad) EXPECT_TRUE(dbias.close(tol_for(DType::F32, 2.0 * std::sqrt(static_cast<double>(c.k)))));
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
    for (DType t : kAllTypes)
        for (bool tb : {false, true}) {
            run_case(cpu(), gpu(), Case{100, 192, 64, false, tb, t, t, 1, GemmEpilogue::Bias, false, 0.0f, 0});
            run_case(cpu(), gpu(), Case{100, 192, 64, false, tb, t, t, 1, GemmEpilogue::BiasGelu, false, 0.0f, 0});
            run_case(cpu(), gpu(), Case{100, 192, 64, false, tb, t, t, 1, GemmEpilogue::BiasGelu, true, 0.0f, 0});
        }
    // Bias of the operands' type with an fp32 output.
    run_case(cpu(), gpu(), Case{33, 64, 32, false, true, DType::BF16, DType::F32, 1, GemmEpilogue::Bias, false, 0.0f, 0});
}

// The MLP's input gradient through its GELU: cuBLASLt's DGELU epilogue for the tanh GELU
// (n a multiple of 8), else the product and then GELU's backward.
TEST_F(CudaGemm, GeluGradientEpilogue) {
    for (DType t : kAllTypes)
        for (bool tanh_gelu : {false, true}) {
            run_case(cpu(), gpu(), Case{100, 192, 64, false, false, t, t, 1, GemmEpilogue::GeluGrad, tanh_gelu, 0.0f, 0});
            run_case(cpu(), gpu(), Case{37, 60, 48, false, false, t, t, 1, GemmEpilogue::GeluGrad, tanh_gelu, 0.0f, 0});
        }
}

// The weight-gradient GEMM with the bias gradient fused (cuBLASLt's BGRADB epilogue, or the
// separate column sums where the library has no algorithm for it).
TEST_F(CudaGemm, FusedBiasGradient) {
    for (DType t : kAllTypes) {
        run_case(cpu(), gpu(), Case{128, 192, 256, true, false, t, DType::F32, 1,
                                    GemmEpilogue::None, false, 1.0f, 0, true});
        run_case(cpu(), gpu(), Case{100, 72, 37, true, false, t, DType::F32, 1,
                                    GemmEpilogue::None, false, 1.0f, 0, true});
    }
    // With another epilogue the column sums are computed on their own.
    run_case(cpu(), gpu(), Case{64, 48, 32, true, false, DType::F16, DType::F16, 1,
                                GemmEpilogue::Bias, false, 0.0f, 0, true});
}

TEST_F(CudaGemm, StridedBatches) {
    for (DType t : kAllTypes)
        for (int tr = 0; tr < 4; ++tr)
            run_case(cpu(), gpu(), Case{48, 40, 64, (tr & 1) != 0, (tr & 2) != 0, t, t, 5,
                                        GemmEpilogue::None, false, 0.0f, 0});
    run_case(cpu(), gpu(), Case{48, 40, 64, false, false, DType::F16, DType::F16, 3,
                                GemmEpilogue::BiasGelu, false, 0.0f, 8});
}

TEST_F(CudaGemm, RejectsBadArguments) {
    Twin x(cpu(), gpu(), DType::F32, 16);
    GemmArgs g;
    g.m = g.n = g.k = 4;
    g.lda = g.ldb = g.ldc = 4;
    g.a = g.b = g.c = x.g();
    g.epilogue = GemmEpilogue::Bias;  // without a bias
    EXPECT_THROW(gpu().gemm(g), UsageError);
    g.epilogue = GemmEpilogue::None;
    g.lda = 2;
    EXPECT_THROW(gpu().gemm(g), UsageError);
    g.lda = 4;
    g.bias_grad = x.gf();  // op(A) must be A^T for a fused bias gradient
    EXPECT_THROW(gpu().gemm(g), UsageError);
    g.bias_grad = nullptr;
    g.epilogue = GemmEpilogue::GeluGrad;  // without the pre-activation
    EXPECT_THROW(gpu().gemm(g), UsageError);
    g.aux = x.g();
    g.ldc = 8;  // C must be contiguous
    EXPECT_THROW(gpu().gemm(g), UsageError);
}

}  // namespace
}  // namespace gpt::test
