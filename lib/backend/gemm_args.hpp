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
}

}  // namespace gpt
