// The linear layers' GEMMs on one GPU, 16-bit against FP8 (issue 34), through our backend
// (Backend::gemm, what training calls) beside cuBLASLt itself: for each FP8 problem the
// fastest of up to 16 algorithms cuBLASLt's heuristic offers, timed one by one (our engine
// takes the heuristic's first), and the card's FP8 peak as the best of them on an 8192^3
// GEMM. Also the casts in front of each FP8 GEMM (cast_to_fp8 with its transposed copy).
// Forward FP8 GEMMs use fast accumulation as training does (GemmArgs::Fp8::fast_accum, off
// under GPT_CUDA_FP8_FAST_ACCUM=off), and so does cuBLASLt's best for them; the gradients'
// do not. The peak is printed both ways (fp8_peak_tflops with fast accumulation, the
// card's FP8 rate; fp8_peak_split_tflops with cuBLASLt's default split accumulator).
//
//   bench_gemm [--shape gpt-1.3b|gpt22b-shape|all] [--reps N] [--dtype bf16|fp16]
//
// Shapes: tokens = micro-batch x sequence of bench/train_gpu's runs (gpt-1.3b: 8 x 2048,
// hidden 2048; gpt22b-shape: 4 x 2048, hidden 6144), one layer's QKV, projection, FC1 and
// FC2 in the three passes (forward y = x W^T; data gradient dx = dy W; weight gradient
// dW += dy^T x into fp32). FP8 operands are laid out as Hopper needs them (both contiguous
// along k: the data gradient reads W^T, the weight gradient dy^T and x^T, as the model's
// transposed copies give them); E4M3 forward, E5M2 gradients (--fp8-format hybrid).
// Timing: CUDA events around each call, median of --reps (default 20) after 3 warm-ups (our
// calls: 3 more than the tuning calls under GPT_CUDA_GEMM_ALGO=autotune);
// the table gives TFLOP/s (2mnk / time) as median (min-max over reps).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda/gemm_algo.hpp"
#include "core/environment.hpp"
#include "core/errors.hpp"

namespace {

using gpt::Backend;
using gpt::DType;
using gpt::Fp8Format;
using gpt::GemmArgs;

constexpr int kWarmup = 3;

// A CUDA runtime or cuBLASLt status: 0 is success for both.
#define CK(x)                                                                       \
    do {                                                                            \
        const int ck_status_ = static_cast<int>(x);                                 \
        if (ck_status_ != 0) GPT_THROW(DeviceError, #x, " failed with status ", ck_status_); \
    } while (0)

struct Spread {
    double median, lo, hi;  // TFLOP/s
};

// Milliseconds of each of reps calls (after the warm-ups), sorted.
std::vector<double> times_ms(int reps, const std::function<void()>& f, int warmup) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < warmup; ++i) f();
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        CK(cudaEventRecord(a, nullptr));
        f();
        CK(cudaEventRecord(b, nullptr));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(t.begin(), t.end());
    return t;
}

// TFLOP/s of a call doing `flops`: the median and the range over reps.
Spread time_it(double flops, int reps, const std::function<void()>& f, int warmup = kWarmup) {
    const std::vector<double> t = times_ms(reps, f, warmup);
    auto tf = [&](double ms) { return flops / (ms * 1e-3) / 1e12; };
    return {tf(t[t.size() / 2]), tf(t.back()), tf(t.front())};
}

// cuBLASLt directly: D[n x m col-major] = A^T B for TN FP8 (cuBLASLt's A = our B [n, k],
// its B = our A [m, k]); the fastest of the heuristic's algorithms, each timed.
Spread best_cublaslt_fp8(cublasLtHandle_t h, void* ws, std::size_t ws_bytes, std::int64_t m,
                         std::int64_t n, std::int64_t k, Fp8Format fa, Fp8Format fb, cudaDataType_t dt,
                         const void* A, const void* B, void* D, const float* sa, const float* sb,
                         float beta, bool fast_accum, int reps, int* algos_tried) {
    auto t8 = [](Fp8Format f) { return f == Fp8Format::E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; };
    cublasLtMatmulDesc_t op;
    CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t T = CUBLAS_OP_T, N = CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &T, sizeof T));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &N, sizeof N));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sb, sizeof sb));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sa, sizeof sa));
    const std::int8_t fast = fast_accum ? 1 : 0;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    cublasLtMatrixLayout_t la, lb, lc;
    CK(cublasLtMatrixLayoutCreate(&la, t8(fb), k, n, k));
    CK(cublasLtMatrixLayoutCreate(&lb, t8(fa), k, m, k));
    CK(cublasLtMatrixLayoutCreate(&lc, dt, n, m, n));
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    const std::uint64_t wsb = ws_bytes;
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    cublasLtMatmulHeuristicResult_t res[16];
    int found = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 16, res, &found));
    const float alpha = 1.0f;
    Spread best{0, 0, 0};
    for (int i = 0; i < found; ++i) {
        const Spread s = time_it(2.0 * m * n * k, reps, [&] {
            CK(cublasLtMatmul(h, op, &alpha, B, la, A, lb, &beta, D, lc, D, lc, &res[i].algo, ws, ws_bytes, nullptr));
        });
        if (s.median > best.median) best = s;
    }
    *algos_tried = found;
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
    return best;
}

struct Shape {
    const char* name;
    std::int64_t tokens, hidden;
};
constexpr Shape kShapes[] = {{"gpt-1.3b", 8 * 2048, 2048}, {"gpt22b-shape", 4 * 2048, 6144}};

std::string fmt(const Spread& s) {
    char b[64];
    std::snprintf(b, sizeof b, "%.1f (%.1f-%.1f)", s.median, s.lo, s.hi);
    return b;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        std::string only = "all";
        int reps = 20;
        DType dtype = DType::BF16;
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            GPT_REQUIRE(i + 1 < argc, UsageError, a, " needs a value");
            if (a == "--shape") only = argv[++i];
            else if (a == "--reps") reps = std::max(1, std::atoi(argv[++i]));
            else if (a == "--dtype") dtype = gpt::parse_dtype(argv[++i]);
            else GPT_THROW(UsageError, "unknown flag ", a, " (expected --shape, --reps, --dtype)");
        }
        auto be = gpt::make_backend("cuda", 0);
        // GPT_CUDA_GEMM_ALGO=autotune: our calls' first ones time the candidates
        // (gemm_algo.hpp), so they are warm-ups too; the timed calls run the chosen algorithm.
        const bool autotune = gpt::env::cuda_gemm_autotune();
        const int ours_warmup = kWarmup + (autotune ? gpt::cuda::kGemmTuneCandidates * gpt::cuda::kGemmTuneRounds : 0);
        std::printf("gemm_algo=%s (ours: %d warm-up calls a GEMM)\n", autotune ? "autotune" : "heuristic", ours_warmup);
        cublasLtHandle_t lt;
        CK(cublasLtCreate(&lt));
        const std::size_t ws_bytes = std::size_t{32} << 20;
        void* ws = be->alloc(ws_bytes);
        const float one = 1.0f;
        auto* scale = static_cast<float*>(be->alloc(4));
        be->copy_to_device(scale, &one, 4);
        auto* amax = static_cast<float*>(be->alloc(4));

        // The card's FP8 peak: the best algorithm on a large square problem.
        {
            const std::int64_t s = 8192;
            void* a = be->alloc(s * s);
            void* b = be->alloc(s * s);
            void* d = be->alloc(s * s * 2);
            be->zero(a, s * s);
            be->zero(b, s * s);
            for (const bool fast : {true, false}) {
                int tried = 0;
                const Spread peak = best_cublaslt_fp8(lt, ws, ws_bytes, s, s, s, Fp8Format::E4M3, Fp8Format::E4M3,
                                                      CUDA_R_16BF, a, b, d, scale, scale, 0.0f, fast, reps, &tried);
                std::printf("fp8_peak%s_tflops=%.1f spread=%s algos=%d shape=8192^3\n", fast ? "" : "_split",
                            peak.median, fmt(peak).c_str(), tried);
            }
            be->free(a);
            be->free(b);
            be->free(d);
        }

        std::printf("\n| shape | GEMM | pass | m x n x k | %s ours | FP8 ours | FP8 cuBLASLt best | FP8 ours / best | casts (ms) |\n",
                    std::string(gpt::dtype_name(dtype)).c_str());
        std::printf("|---|---|---|---|---|---|---|---|---|\n");
        for (const Shape& sh : kShapes) {
            if (only != "all" && only != sh.name) continue;
            const std::int64_t T = sh.tokens, h = sh.hidden;
            struct Lin { const char* name; std::int64_t out, in; };
            const Lin lins[] = {{"qkv", 3 * h, h}, {"proj", h, h}, {"fc1", 4 * h, h}, {"fc2", h, 4 * h}};
            for (const Lin& l : lins) {
                const std::size_t es = gpt::dtype_size(dtype);
                void* x = be->alloc(T * l.in * es);
                void* w = be->alloc(l.out * l.in * es);
                void* y = be->alloc(T * l.out * es);
                void* dy = be->alloc(T * l.out * es);
                void* dx = be->alloc(T * l.in * es);
                void* dw = be->alloc(l.out * l.in * 4);
                // Zeros: the contents do not change the timing.
                be->zero(x, T * l.in * es);
                be->zero(w, l.out * l.in * es);
                be->zero(dy, T * l.out * es);
                be->zero(dw, l.out * l.in * 4);
                auto* x8 = static_cast<std::uint8_t*>(be->alloc(T * l.in));
                auto* xt8 = static_cast<std::uint8_t*>(be->alloc(T * l.in));
                auto* w8 = static_cast<std::uint8_t*>(be->alloc(l.out * l.in));
                auto* wt8 = static_cast<std::uint8_t*>(be->alloc(l.out * l.in));
                auto* dy8 = static_cast<std::uint8_t*>(be->alloc(T * l.out));
                auto* dyt8 = static_cast<std::uint8_t*>(be->alloc(T * l.out));
                be->cast_to_fp8(x, dtype, T, l.in, Fp8Format::E4M3, scale, x8, xt8, amax);
                be->cast_to_fp8(w, dtype, l.out, l.in, Fp8Format::E4M3, scale, w8, wt8, amax);
                be->cast_to_fp8(dy, dtype, T, l.out, Fp8Format::E5M2, scale, dy8, dyt8, amax);

                struct Pass {
                    const char* name;
                    GemmArgs g16, g8;
                    Fp8Format fa, fb;
                    cudaDataType_t dt;
                    float beta;
                };
                auto args = [&](bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const void* a,
                                std::int64_t lda, const void* b, std::int64_t ldb, void* c, DType ct, float beta) {
                    GemmArgs g;
                    g.trans_a = ta;
                    g.trans_b = tb;
                    g.m = m; g.n = n; g.k = k;
                    g.a = a; g.lda = lda; g.b = b; g.ldb = ldb; g.c = c; g.ldc = n;
                    g.dtype = dtype;
                    g.c_dtype = ct;
                    g.beta = beta;
                    return g;
                };
                auto fp8 = [&](GemmArgs g, Fp8Format fa, Fp8Format fb) {
                    g.fp8.on = true;
                    g.fp8.a_format = fa;
                    g.fp8.b_format = fb;
                    g.fp8.a_scale_inv = scale;
                    g.fp8.b_scale_inv = scale;
                    return g;
                };
                auto fast = [](GemmArgs g) {
                    g.fp8.fast_accum = true;  // the forward GEMMs, as Fp8Linears asks
                    return g;
                };
                const cudaDataType_t d16 = dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
                Pass passes[] = {
                    {"fwd", args(false, true, T, l.out, l.in, x, l.in, w, l.in, y, dtype, 0.0f),
                     fast(fp8(args(false, true, T, l.out, l.in, x8, l.in, w8, l.in, y, dtype, 0.0f), Fp8Format::E4M3, Fp8Format::E4M3)),
                     Fp8Format::E4M3, Fp8Format::E4M3, d16, 0.0f},
                    {"dgrad", args(false, false, T, l.in, l.out, dy, l.out, w, l.in, dx, dtype, 0.0f),
                     fp8(args(false, true, T, l.in, l.out, dy8, l.out, wt8, l.out, dx, dtype, 0.0f), Fp8Format::E5M2, Fp8Format::E4M3),
                     Fp8Format::E5M2, Fp8Format::E4M3, d16, 0.0f},
                    {"wgrad", args(true, false, l.out, l.in, T, dy, l.out, x, l.in, dw, DType::F32, 1.0f),
                     fp8(args(false, true, l.out, l.in, T, dyt8, T, xt8, T, dw, DType::F32, 1.0f), Fp8Format::E5M2, Fp8Format::E4M3),
                     Fp8Format::E5M2, Fp8Format::E4M3, CUDA_R_32F, 1.0f},
                };
                for (const Pass& p : passes) {
                    const double flops = 2.0 * p.g16.m * p.g16.n * p.g16.k;
                    const Spread s16 = time_it(flops, reps, [&] { be->gemm(p.g16); }, ours_warmup);
                    const Spread s8 = time_it(flops, reps, [&] { be->gemm(p.g8); }, ours_warmup);
                    int tried = 0;
                    const Spread best = best_cublaslt_fp8(lt, ws, ws_bytes, p.g8.m, p.g8.n, p.g8.k, p.fa, p.fb, p.dt,
                                                          p.g8.a, p.g8.b, p.g8.c, scale, scale, p.beta,
                                                          p.g8.fp8.fast_accum && gpt::env::cuda_fp8_fast_accum_forward(),
                                                          reps, &tried);
                    // The cast each pass adds (with the transposed copy the weight gradient
                    // reads): fwd x -> x8 and x^T; dgrad dy -> dy8 and dy^T. W's two copies are
                    // made once per step, not per micro-batch: left out.
                    double cast_ms = 0;
                    const bool fwd = std::strcmp(p.name, "fwd") == 0;
                    if (std::strcmp(p.name, "wgrad") != 0) {
                        const std::vector<double> c = times_ms(reps, [&] {
                            if (fwd)
                                be->cast_to_fp8(x, dtype, T, l.in, Fp8Format::E4M3, scale, x8, xt8, amax);
                            else
                                be->cast_to_fp8(dy, dtype, T, l.out, Fp8Format::E5M2, scale, dy8, dyt8, amax);
                        }, kWarmup);
                        cast_ms = c[c.size() / 2];
                    }
                    std::printf("| %s | %s | %s | %lld x %lld x %lld | %s | %s | %s | %.2f | %.3f |\n", sh.name, l.name,
                                p.name, static_cast<long long>(p.g16.m), static_cast<long long>(p.g16.n),
                                static_cast<long long>(p.g16.k), fmt(s16).c_str(), fmt(s8).c_str(),
                                fmt(best).c_str(), best.median > 0 ? s8.median / best.median : 0.0, cast_ms);
                    std::fflush(stdout);
                }
                for (void* q : {x, w, y, dy, dx, dw}) be->free(q);
                for (void* q : {static_cast<void*>(x8), static_cast<void*>(xt8), static_cast<void*>(w8),
                                static_cast<void*>(wt8), static_cast<void*>(dy8), static_cast<void*>(dyt8)})
                    be->free(q);
            }
        }
        be->free(ws);
        be->free(scale);
        be->free(amax);
        cublasLtDestroy(lt);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_gemm: %s\n", e.what());
        return 1;
    }
}
