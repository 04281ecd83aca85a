// GEMM: fp32 goes straight to cblas_sgemm on the caller's memory (no copies); 16-bit
// operands are converted to packed fp32 first. Epilogues write the bias into the output
// before the GEMM and let sgemm add the product (beta = 1), so Bias costs one pass over C.
// Threads are ours (OpenMP), OpenBLAS runs serial inside them: see gemm_f32.
#include <array>
#include <cstring>

#include "backend/cpu/blas.hpp"
#include "backend/cpu/common.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/vmath.hpp"
#include "core/fp8.hpp"

namespace gpt::cpu {

namespace {

// Strided-batched calls whose single GEMM is below this many multiply-adds run one GEMM
// per thread (OpenBLAS serial) instead of one multithreaded GEMM after another.
constexpr double kSmallGemmMacs = 4.0e6;
// Below this many multiply-adds (~10 us) the GEMM stays on the calling thread: splitting
// gains microseconds and risks waiting for a descheduled thread.
constexpr double kParallelGemmMacs = 1.0e6;

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

// The element type of operand A or B: the GEMM's dtype, or an FP8 format (issue 34).
struct Operand {
    DType dtype;
    bool fp8 = false;
    Fp8Format format = Fp8Format::E4M3;
    std::size_t size() const { return fp8 ? 1 : dtype_size(dtype); }
};

// stage_to_f32 for either kind of operand; FP8 codes decode exactly through a table.
void stage_operand(const void* src, const Operand& t, std::int64_t rows, std::int64_t cols,
                   std::int64_t ld, float* dst) {
    if (!t.fp8) {
        stage_to_f32(src, t.dtype, rows, cols, ld, dst);
        return;
    }
    static const auto tables = [] {
        std::array<std::array<float, 256>, 2> v{};
        for (int c = 0; c < 256; ++c) {
            v[0][c] = fp8_to_float(static_cast<std::uint8_t>(c), Fp8Format::E4M3);
            v[1][c] = fp8_to_float(static_cast<std::uint8_t>(c), Fp8Format::E5M2);
        }
        return v;
    }();
    const float* table = tables[t.format == Fp8Format::E4M3 ? 0 : 1].data();
    const auto* s = static_cast<const std::uint8_t*>(src);
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) dst[r * cols + c] = table[s[r * ld + c]];
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

// c[m, n] = gelu(pre[m, n]), rows split over threads when `parallel`.
void apply_gelu(const float* pre, std::int64_t ld_pre, float* c, std::int64_t ldc,
                std::int64_t m, std::int64_t n, bool tanh_gelu, bool parallel) {
#pragma omp parallel for schedule(static) if (parallel && m * n >= kParallelMin)
    for (std::int64_t r = 0; r < m; ++r) {
        const float* x = pre + r * ld_pre;
        float* y = c + r * ldc;
        if (tanh_gelu) {
#pragma omp simd
            for (std::int64_t j = 0; j < n; ++j) y[j] = gelu_tanh(x[j]);
        } else {
#pragma omp simd
            for (std::int64_t j = 0; j < n; ++j) y[j] = gelu_erf(x[j]);
        }
    }
}

// One GEMM block with everything in fp32, on the calling thread: C[m, n] = alpha*op(A)op(B)
// + beta*C, then the epilogue. For BiasGelu `pre` receives the pre-activation and `c` the
// GELU of it. Operands point at the block's first row/column already.
void gemm_block(const GemmArgs& g, std::int64_t m, std::int64_t n, const float* a,
                std::int64_t lda, const float* b, std::int64_t ldb, float* c, std::int64_t ldc,
                const float* bias, float* pre, std::int64_t ld_pre) {
    if (g.epilogue == GemmEpilogue::None) {
        sgemm(g.trans_a, g.trans_b, m, n, g.k, g.alpha, a, lda, b, ldb, g.beta, c, ldc);
        return;
    }
    float* dst = g.epilogue == GemmEpilogue::BiasGelu ? pre : c;
    std::int64_t ld_dst = g.epilogue == GemmEpilogue::BiasGelu ? ld_pre : ldc;
    for (std::int64_t r = 0; r < m; ++r) std::memcpy(dst + r * ld_dst, bias, n * sizeof(float));
    sgemm(g.trans_a, g.trans_b, m, n, g.k, g.alpha, a, lda, b, ldb, 1.0f, dst, ld_dst);
    if (g.epilogue == GemmEpilogue::BiasGelu)
        apply_gelu(dst, ld_dst, c, ldc, m, n, g.tanh_gelu, false);
}

// The whole GEMM on our OpenMP threads: C is cut into one block per thread along its longer
// side and each thread runs a single-threaded sgemm plus the epilogue on its block. OpenBLAS
// never starts threads of its own, so the cores are never oversubscribed, and the epilogue
// runs on data still in that thread's cache.
void gemm_f32(const GemmArgs& g, const float* a, std::int64_t lda, const float* b,
              std::int64_t ldb, float* c, std::int64_t ldc, const float* bias, float* pre,
              std::int64_t ld_pre, bool parallel) {
    const double macs = static_cast<double>(g.m) * g.n * g.k;
    const int nt = parallel && macs >= kParallelGemmMacs ? max_threads() : 1;
    if (nt == 1) {
        gemm_block(g, g.m, g.n, a, lda, b, ldb, c, ldc, bias, pre, ld_pre);
        return;
    }
    const bool split_rows = g.m >= g.n;
    const std::int64_t len = split_rows ? g.m : g.n;
#pragma omp parallel num_threads(nt)
    {
        // The team may be smaller than asked (e.g. when called inside a parallel region),
        // so the blocks follow the team actually running. Block edges on multiples of 16
        // keep every block's vector loads aligned to the kernel's.
        const int team = omp_get_num_threads();
        const std::int64_t step = ((len + team - 1) / team + 15) / 16 * 16;
        const std::int64_t lo = std::min(len, omp_get_thread_num() * step);
        const std::int64_t hi = std::min(len, lo + step);
        if (hi > lo) {
            if (split_rows) {
                gemm_block(g, hi - lo, g.n, g.trans_a ? a + lo : a + lo * lda, lda, b, ldb,
                           c + lo * ldc, ldc, bias, pre ? pre + lo * ld_pre : nullptr, ld_pre);
            } else {
                gemm_block(g, g.m, hi - lo, a, lda, g.trans_b ? b + lo * ldb : b + lo, ldb,
                           c + lo, ldc, bias ? bias + lo : nullptr, pre ? pre + lo : nullptr,
                           ld_pre);
            }
        }
    }
}

}  // namespace

void CpuBackend::do_gemm(const GemmArgs& g) {
    // The fused bias gradient: the column sums of dY, exactly what bias_grad computes.
    if (g.bias_grad) bias_grad(g.a, g.bias_grad, g.k, g.m, g.dtype);
    if (g.m == 0 || g.n == 0) return;
    if (g.epilogue == GemmEpilogue::GeluGrad) {
        // The product rounded to C's type, then GELU's backward on it: exactly the separate
        // calls, so fusing changes nothing on the CPU.
        GemmArgs plain = g;
        plain.epilogue = GemmEpilogue::None;
        plain.bias_grad = nullptr;
        gemm(plain);
        gelu_backward(g.c, g.aux, g.c, g.m * g.n, g.tanh_gelu, g.c_dtype);
        return;
    }
    const bool all_f32 = g.dtype == DType::F32 && g.c_dtype == DType::F32 && !g.fp8.on;
    const Operand ta{g.dtype, g.fp8.on, g.fp8.a_format}, tb{g.dtype, g.fp8.on, g.fp8.b_format};
    const std::size_t asz = ta.size(), bsz = tb.size(), csz = dtype_size(g.c_dtype);
    // FP8: the codes' product is dequantised by the two scales, as cuBLASLt's A/B scales.
    const float alpha = g.fp8.on ? g.alpha * *g.fp8.a_scale_inv * *g.fp8.b_scale_inv : g.alpha;

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
        BlasSerialRegion serial;
        if (g.batch > 1 && macs < kSmallGemmMacs && max_threads() > 1) {
#pragma omp parallel for schedule(dynamic)
            for (std::int64_t i = 0; i < g.batch; ++i) one(i, false);
        } else {
            for (std::int64_t i = 0; i < g.batch; ++i) one(i, true);
        }
        return;
    }

    // Mixed/16-bit path: blocks of at most kStageBlock^3 are staged as packed fp32 (A, B
    // and, for 16-bit C, C and the pre-activation), so scratch stays bounded (16 MiB) even
    // for vocab-sized operands. K blocks after the first accumulate with beta = 1.
    constexpr std::int64_t kStageBlock = 1024;
    const bool c_f32 = g.c_dtype == DType::F32;
    const bool gelu = g.epilogue == GemmEpilogue::BiasGelu;
    const std::int64_t bmax = kStageBlock;
    float* a32 = scratch(1, bmax * bmax);
    float* b32 = scratch(2, bmax * bmax);
    float* c32 = c_f32 ? nullptr : scratch(3, bmax * bmax);
    float* pre32 = gelu && !c_f32 ? scratch(4, bmax * bmax) : nullptr;
    BlasSerialRegion serial;
    for (std::int64_t t = 0; t < g.batch; ++t) {
        const char* A = static_cast<const char*>(g.a) + t * g.stride_a * asz;
        const char* B = static_cast<const char*>(g.b) + t * g.stride_b * bsz;
        char* C = static_cast<char*>(g.c) + t * g.stride_c * csz;
        char* AUX = g.aux ? static_cast<char*>(g.aux) + t * g.stride_c * csz : nullptr;
        for (std::int64_t i0 = 0; i0 < g.m; i0 += bmax) {
            const std::int64_t mb = std::min(bmax, g.m - i0);
            for (std::int64_t j0 = 0; j0 < g.n; j0 += bmax) {
                const std::int64_t nb = std::min(bmax, g.n - j0);
                const std::int64_t c_off = i0 * g.ldc + j0;
                float* cdst = c_f32 ? reinterpret_cast<float*>(C) + c_off : c32;
                const std::int64_t ldc = c_f32 ? g.ldc : nb;
                float* pre = nullptr;
                if (gelu) pre = c_f32 ? reinterpret_cast<float*>(AUX) + c_off : pre32;
                if (!c_f32 && g.beta != 0.0f)
                    stage_to_f32(C + c_off * csz, g.c_dtype, mb, nb, g.ldc, c32);
                for (std::int64_t k0 = 0; k0 < g.k || k0 == 0; k0 += bmax) {
                    const std::int64_t kb = std::min(bmax, g.k - k0);
                    if (g.trans_a)
                        stage_operand(A + (k0 * g.lda + i0) * asz, ta, kb, mb, g.lda, a32);
                    else
                        stage_operand(A + (i0 * g.lda + k0) * asz, ta, mb, kb, g.lda, a32);
                    if (g.trans_b)
                        stage_operand(B + (j0 * g.ldb + k0) * bsz, tb, nb, kb, g.ldb, b32);
                    else
                        stage_operand(B + (k0 * g.ldb + j0) * bsz, tb, kb, nb, g.ldb, b32);
                    GemmArgs sub = g;
                    sub.alpha = alpha;
                    sub.m = mb;
                    sub.n = nb;
                    sub.k = kb;
                    // The bias is written once (first K block); GELU runs after the last.
                    if (k0 > 0) {
                        sub.beta = 1.0f;
                        sub.epilogue = GemmEpilogue::None;
                    } else if (gelu) {
                        sub.epilogue = GemmEpilogue::Bias;
                    }
                    float* dst = gelu ? pre : cdst;
                    const std::int64_t ld_dst = gelu ? (c_f32 ? g.ldc : nb) : ldc;
                    gemm_f32(sub, a32, g.trans_a ? mb : kb, b32, g.trans_b ? kb : nb, dst, ld_dst,
                             bias ? bias + j0 : nullptr, nullptr, 0, true);
                }
                if (gelu)
                    apply_gelu(pre, c_f32 ? g.ldc : nb, cdst, ldc, mb, nb, g.tanh_gelu, true);
                if (!c_f32) {
                    unstage_from_f32(c32, nb, C + c_off * csz, g.c_dtype, mb, nb, g.ldc);
                    if (gelu) unstage_from_f32(pre32, nb, AUX + c_off * csz, g.c_dtype, mb, nb, g.ldc);
                }
            }
        }
    }
}

}  // namespace gpt::cpu
