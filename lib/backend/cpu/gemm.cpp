// GEMM: fp32 goes straight to cblas_sgemm on the caller's memory (no copies); 16-bit
// operands are converted to packed fp32 first. Epilogues write the bias into the output
// before the GEMM and let sgemm add the product (beta = 1), so Bias costs one pass over C.
#include <cstring>

#include "backend/cpu/blas.hpp"
#include "backend/cpu/common.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/vmath.hpp"

namespace gpt::cpu {

namespace {

// Strided-batched calls whose single GEMM is below this many multiply-adds run one GEMM
// per thread (OpenBLAS serial) instead of one multithreaded GEMM after another.
constexpr double kSmallGemmMacs = 4.0e6;

// Packs rows x cols of a row-major matrix with leading dimension ld into fp32 [rows, cols].
void stage_to_f32(const void* src, DType t, std::int64_t rows, std::int64_t cols,
                  std::int64_t ld, float* dst) {
    dispatch(t, [&](auto tag) {
        using T = decltype(tag);
        const T* s = static_cast<const T*>(src);
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
        for (std::int64_t r = 0; r < rows; ++r)
            convert(s + r * ld, dst + r * cols, static_cast<std::size_t>(cols));
    });
}

// Writes fp32 [rows, cols] (leading dimension src_ld) into a row-major matrix of type t.
void unstage_from_f32(const float* src, std::int64_t src_ld, void* dst, DType t,
                      std::int64_t rows, std::int64_t cols, std::int64_t ld) {
    dispatch(t, [&](auto tag) {
        using T = decltype(tag);
        T* d = static_cast<T*>(dst);
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
        for (std::int64_t r = 0; r < rows; ++r)
            convert(src + r * src_ld, d + r * ld, static_cast<std::size_t>(cols));
    });
}

// One GEMM with everything in fp32: C = alpha*op(A)op(B) + beta*C, then the epilogue.
// For BiasGelu `pre` receives the pre-activation and `c` the GELU of it.
void gemm_f32(const GemmArgs& g, const float* a, std::int64_t lda, const float* b,
              std::int64_t ldb, float* c, std::int64_t ldc, const float* bias, float* pre,
              std::int64_t ld_pre, bool parallel_epilogue) {
    if (g.epilogue == GemmEpilogue::None) {
        sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, c, ldc);
        return;
    }
    float* dst = g.epilogue == GemmEpilogue::BiasGelu ? pre : c;
    std::int64_t ld_dst = g.epilogue == GemmEpilogue::BiasGelu ? ld_pre : ldc;
    const std::int64_t m = g.m, n = g.n;
#pragma omp parallel for schedule(static) if (parallel_epilogue && m * n >= kParallelMin)
    for (std::int64_t r = 0; r < m; ++r) std::memcpy(dst + r * ld_dst, bias, n * sizeof(float));
    sgemm(g.trans_a, g.trans_b, m, n, g.k, g.alpha, a, lda, b, ldb, 1.0f, dst, ld_dst);
    if (g.epilogue == GemmEpilogue::BiasGelu) {
        const bool tanh = g.tanh_gelu;
#pragma omp parallel for schedule(static) if (parallel_epilogue && m * n >= kParallelMin)
        for (std::int64_t r = 0; r < m; ++r) {
            const float* x = dst + r * ld_dst;
            float* y = c + r * ldc;
            if (tanh) {
#pragma omp simd
                for (std::int64_t j = 0; j < n; ++j) y[j] = gelu_tanh(x[j]);
            } else {
#pragma omp simd
                for (std::int64_t j = 0; j < n; ++j) y[j] = gelu_erf(x[j]);
            }
        }
    }
}

void validate(const GemmArgs& g) {
    GPT_REQUIRE(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 1, UsageError,
                "gemm: bad shape m=", g.m, " n=", g.n, " k=", g.k, " batch=", g.batch);
    GPT_REQUIRE(g.lda >= (g.trans_a ? g.m : g.k) && g.ldb >= (g.trans_b ? g.k : g.n) &&
                    g.ldc >= g.n,
                UsageError, "gemm: leading dimension too small (lda=", g.lda, " ldb=", g.ldb,
                " ldc=", g.ldc, ")");
    GPT_REQUIRE(g.a && g.b && g.c, UsageError, "gemm: null operand");
    if (g.epilogue != GemmEpilogue::None) {
        GPT_REQUIRE(g.beta == 0.0f, UsageError, "gemm: bias epilogues need beta = 0");
        GPT_REQUIRE(g.bias, UsageError, "gemm: bias epilogue without a bias");
    }
    if (g.epilogue == GemmEpilogue::BiasGelu)
        GPT_REQUIRE(g.aux, UsageError, "gemm: BiasGelu epilogue without an aux buffer");
}

}  // namespace

void CpuBackend::gemm(const GemmArgs& g) {
    validate(g);
    if (g.m == 0 || g.n == 0) return;
    const bool all_f32 = g.dtype == DType::F32 && g.c_dtype == DType::F32;
    const std::int64_t a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
    const std::int64_t b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
    const std::size_t dsz = dtype_size(g.dtype), csz = dtype_size(g.c_dtype);

    // Bias in fp32 (converted once for every batch entry).
    const float* bias = nullptr;
    if (g.epilogue != GemmEpilogue::None) {
        if (g.dtype == DType::F32) {
            bias = static_cast<const float*>(g.bias);
        } else {
            float* b32 = scratch(0, g.n);
            stage_to_f32(g.bias, g.dtype, 1, g.n, g.n, b32);
            bias = b32;
        }
    }

    if (all_f32) {
        const float* A = static_cast<const float*>(g.a);
        const float* B = static_cast<const float*>(g.b);
        float* C = static_cast<float*>(g.c);
        float* aux = static_cast<float*>(g.aux);
        auto one = [&](std::int64_t i, bool par) {
            gemm_f32(g, A + i * g.stride_a, g.lda, B + i * g.stride_b, g.ldb,
                     C + i * g.stride_c, g.ldc, bias, aux ? aux + i * g.stride_c : nullptr,
                     g.ldc, par);
        };
        double macs = static_cast<double>(g.m) * g.n * g.k;
        if (g.batch > 1 && macs < kSmallGemmMacs && max_threads() > 1) {
            BlasSerialRegion serial;
#pragma omp parallel for schedule(dynamic)
            for (std::int64_t i = 0; i < g.batch; ++i) one(i, false);
        } else {
            for (std::int64_t i = 0; i < g.batch; ++i) one(i, true);
        }
        return;
    }

    // Mixed/16-bit path: stage A, B (and C when it is 16-bit) as packed fp32.
    float* a32 = scratch(1, a_rows * a_cols);
    float* b32 = scratch(2, b_rows * b_cols);
    const bool c_f32 = g.c_dtype == DType::F32;
    float* c32 = c_f32 ? nullptr : scratch(3, g.m * g.n);
    float* pre32 = g.epilogue == GemmEpilogue::BiasGelu ? scratch(4, g.m * g.n) : nullptr;
    for (std::int64_t i = 0; i < g.batch; ++i) {
        const char* A = static_cast<const char*>(g.a) + i * g.stride_a * dsz;
        const char* B = static_cast<const char*>(g.b) + i * g.stride_b * dsz;
        char* C = static_cast<char*>(g.c) + i * g.stride_c * csz;
        char* AUX = g.aux ? static_cast<char*>(g.aux) + i * g.stride_c * csz : nullptr;
        stage_to_f32(A, g.dtype, a_rows, a_cols, g.lda, a32);
        stage_to_f32(B, g.dtype, b_rows, b_cols, g.ldb, b32);
        float* cdst = c_f32 ? reinterpret_cast<float*>(C) : c32;
        std::int64_t ldc = c_f32 ? g.ldc : g.n;
        if (!c_f32 && g.beta != 0.0f) stage_to_f32(C, g.c_dtype, g.m, g.n, g.ldc, c32);
        float* pre = nullptr;
        std::int64_t ld_pre = 0;
        if (pre32) {
            pre = c_f32 ? reinterpret_cast<float*>(AUX) : pre32;
            ld_pre = c_f32 ? g.ldc : g.n;
        }
        gemm_f32(g, a32, a_cols, b32, b_cols, cdst, ldc, bias, pre, ld_pre, true);
        if (!c_f32) {
            unstage_from_f32(c32, g.n, C, g.c_dtype, g.m, g.n, g.ldc);
            if (pre32) unstage_from_f32(pre32, g.n, AUX, g.c_dtype, g.m, g.n, g.ldc);
        }
    }
}

}  // namespace gpt::cpu
