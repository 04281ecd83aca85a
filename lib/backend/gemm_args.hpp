// Argument rules of Backend::gemm (checked once, in checked_ops.cpp, for every backend):
// shapes, leading dimensions, what each epilogue needs. Misuse is a bug: InternalError.
#pragma once

#include "backend/backend.hpp"
#include "core/errors.hpp"

namespace gpt {

inline void validate_gemm_args(const GemmArgs& g) {
    GPT_REQUIRE(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 1, InternalError,
                "gemm: bad shape m=", g.m, " n=", g.n, " k=", g.k, " batch=", g.batch);
    GPT_REQUIRE(g.lda >= (g.trans_a ? g.m : g.k) && g.ldb >= (g.trans_b ? g.k : g.n) &&
                    g.ldc >= g.n,
                InternalError, "gemm: leading dimension too small (lda=", g.lda, " ldb=", g.ldb,
                " ldc=", g.ldc, ")");
    GPT_REQUIRE(g.a && g.b && g.c, InternalError, "gemm: null operand");
    if (g.epilogue != GemmEpilogue::None)
        GPT_REQUIRE(g.beta == 0.0f, InternalError, "gemm: epilogues need beta = 0");
    if (g.epilogue == GemmEpilogue::Bias || g.epilogue == GemmEpilogue::BiasGelu)
        GPT_REQUIRE(g.bias, InternalError, "gemm: bias epilogue without a bias");
    if (g.epilogue == GemmEpilogue::BiasGelu || g.epilogue == GemmEpilogue::GeluGrad)
        GPT_REQUIRE(g.aux, InternalError, "gemm: GELU epilogue without an aux buffer");
    if (g.epilogue == GemmEpilogue::GeluGrad)
        GPT_REQUIRE(g.ldc == g.n && g.batch == 1, InternalError,
                    "gemm: the GeluGrad epilogue needs a contiguous C (ldc = n) and batch 1 (ldc=", g.ldc,
                    " n=", g.n, " batch=", g.batch, ")");
    if (g.bias_grad)
        GPT_REQUIRE(g.trans_a && g.lda == g.m && g.batch == 1, InternalError,
                    "gemm: a fused bias gradient needs op(A) = A^T with A a contiguous [k, m] "
                    "matrix (the weight-gradient GEMM dW = dY^T X) and batch 1 (trans_a=",
                    g.trans_a, " lda=", g.lda, " m=", g.m, " batch=", g.batch, ")");
    if (g.fp8.on) {
        // cuBLASLt's FP8 rules on Hopper (its "TN" layout, 16-byte aligned dimensions),
        // enforced on every backend so a call the GPU would refuse never passes on the CPU.
        GPT_REQUIRE(!g.trans_a && g.trans_b && g.batch == 1 && !g.bias_grad, InternalError,
                    "gemm: FP8 operands need op(A) = A, op(B) = B^T, batch 1 and no fused bias "
                    "gradient (trans_a=", g.trans_a, " trans_b=", g.trans_b, " batch=", g.batch, ")");
        GPT_REQUIRE(g.m % 16 == 0 && g.n % 16 == 0 && g.k % 16 == 0 && g.lda % 16 == 0 &&
                        g.ldb % 16 == 0 && g.ldc * static_cast<std::int64_t>(dtype_size(g.c_dtype)) % 16 == 0,
                    InternalError, "gemm: FP8 needs m, n, k, lda, ldb and C's row bytes multiples of 16 (m=",
                    g.m, " n=", g.n, " k=", g.k, " lda=", g.lda, " ldb=", g.ldb, " ldc=", g.ldc, ")");
        GPT_REQUIRE(g.fp8.a_format == Fp8Format::E4M3 || g.fp8.b_format == Fp8Format::E4M3,
                    InternalError, "gemm: FP8 operands cannot both be E5M2");
        GPT_REQUIRE(g.fp8.a_scale_inv && g.fp8.b_scale_inv, InternalError,
                    "gemm: FP8 operands without their scales");
    }
}

}  // namespace gpt
