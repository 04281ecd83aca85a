// Microbenchmark of the CPU backend on gpt-tiny's shapes (hidden 256, 4 heads, seq 256,
// micro-batch 8, vocab 50304): GEMM GFLOP/s, attention forward+backward (plain vs flash),
// and the main elementwise ops. Prints one table; no pass/fail.
//   bench_backend_ops [--dtype fp32|fp16|bf16] [--reps N] [--cpu-time]
//                     [--only gemm|attention|elementwise]
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/timer.hpp"

namespace {

using gpt::Backend;
using gpt::DType;

bool g_cpu_time = false;

// Best of reps (after one warm-up): the steady-state cost the training loop sees. With
// --cpu-time the process CPU time is used instead of wall time: on a shared, loaded machine
// and with OMP_NUM_THREADS=1 that measures the kernels, not the neighbours.
double best_seconds(int reps, const std::function<void()>& f) {
    f();
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        gpt::Stopwatch sw;
        std::clock_t c0 = std::clock();
        f();
        double t = g_cpu_time ? static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC
                              : sw.seconds();
        best = std::min(best, t);
    }
    return best;
}

struct Mem {
    Backend& be;
    std::vector<void*> ptrs;
    void* get(std::size_t bytes, float fill = 0.01f) {
        void* p = be.alloc(bytes);
        // Small finite values in any dtype: fp32 0.01 pattern or 16-bit 0x2000 (~0.008 fp16).
        if (fill != 0.0f) {
            std::vector<float> host(bytes / 4, fill);
            be.copy_to_device(p, host.data(), bytes / 4 * 4);
        } else {
            be.zero(p, bytes);
        }
        ptrs.push_back(p);
        return p;
    }
    ~Mem() {
        for (void* p : ptrs) be.free(p);
    }
};

}  // namespace

int main(int argc, char** argv) {
    DType dt = DType::F32;
    int reps = 5;
    std::string only;  // "gemm", "attention", "elementwise" or "" for all
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--dtype") && i + 1 < argc) dt = gpt::parse_dtype(argv[++i]);
        else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--cpu-time")) g_cpu_time = true;
        else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else {
            std::fprintf(stderr, "usage: %s [--dtype fp32|fp16|bf16] [--reps N] [--cpu-time] "
                                 "[--only gemm|attention|elementwise]\n", argv[0]);
            return 2;
        }
    }
    auto be = gpt::make_backend("cpu", 0);
    Mem mem{*be, {}};
    const std::int64_t s = 256, b = 8, h = 256, np = 4, hn = 64, ffn = 1024, vocab = 50304;
    const std::int64_t T = s * b;
    const std::size_t es = gpt::dtype_size(dt);
    std::printf("gpt-tiny shapes, dtype %s, best of %d\n", std::string(gpt::dtype_name(dt)).c_str(), reps);
    std::printf("%-44s %10s %10s\n", "op", "ms", "GFLOP/s");

    struct G {
        const char* name;
        std::int64_t m, n, k;
        bool ta, tb;
        float beta;
        gpt::GemmEpilogue epi;
    };
    const G gemms[] = {
        {"fwd qkv      x[T,h] W[3h,h]^T + b", T, 3 * h, h, false, true, 0, gpt::GemmEpilogue::Bias},
        {"fwd proj     x[T,h] W[h,h]^T + b", T, h, h, false, true, 0, gpt::GemmEpilogue::Bias},
        {"fwd fc1+gelu x[T,h] W[4h,h]^T + b", T, ffn, h, false, true, 0, gpt::GemmEpilogue::BiasGelu},
        {"fwd fc2      x[T,4h] W[h,4h]^T + b", T, h, ffn, false, true, 0, gpt::GemmEpilogue::Bias},
        {"fwd logits   x[T,h] E[V,h]^T", T, vocab, h, false, true, 0, gpt::GemmEpilogue::None},
        {"bwd dx qkv   dy[T,3h] W[3h,h]", T, h, 3 * h, false, false, 0, gpt::GemmEpilogue::None},
        {"bwd dW qkv   dy^T[3h,T] x[T,h] (+=)", 3 * h, h, T, true, false, 1, gpt::GemmEpilogue::None},
        {"bwd dx fc2   dy[T,h] W[h,4h]", T, ffn, h, false, false, 0, gpt::GemmEpilogue::None},
        {"bwd dW fc2   dy^T[h,T] x[T,4h] (+=)", h, ffn, T, true, false, 1, gpt::GemmEpilogue::None},
        {"bwd dx logit dl[T,V] E[V,h]", T, h, vocab, false, false, 0, gpt::GemmEpilogue::None},
        {"bwd dE logit dl^T[V,T] x[T,h] (+=)", vocab, h, T, true, false, 1, gpt::GemmEpilogue::None},
    };
    double total_gemm = 0;
    for (const G& g : gemms) {
        if (!only.empty() && only != "gemm") break;
        const std::int64_t ar = g.ta ? g.k : g.m, ac = g.ta ? g.m : g.k;
        const std::int64_t br = g.tb ? g.n : g.k, bc = g.tb ? g.k : g.n;
        gpt::GemmArgs a;
        a.trans_a = g.ta;
        a.trans_b = g.tb;
        a.m = g.m;
        a.n = g.n;
        a.k = g.k;
        a.a = mem.get(ar * ac * es);
        a.lda = ac;
        a.b = mem.get(br * bc * es);
        a.ldb = bc;
        a.c_dtype = g.beta != 0 ? DType::F32 : dt;  // weight gradients accumulate in fp32
        a.c = mem.get(g.m * g.n * gpt::dtype_size(a.c_dtype));
        a.ldc = g.n;
        a.beta = g.beta;
        a.dtype = dt;
        a.epilogue = g.epi;
        a.bias = mem.get(g.n * es);
        if (g.epi == gpt::GemmEpilogue::BiasGelu) a.aux = mem.get(g.m * g.n * es);
        double sec = best_seconds(reps, [&] { be->gemm(a); });
        total_gemm += sec;
        std::printf("%-44s %10.3f %10.1f\n", g.name, sec * 1e3, 2.0 * g.m * g.n * g.k / sec * 1e-9);
    }
    if (total_gemm > 0) std::printf("%-44s %10.3f\n", "sum of the GEMMs above", total_gemm * 1e3);

    for (float p : {0.0f, 0.1f}) {
        if (!only.empty() && only != "attention") break;
        for (bool flash : {false, true}) {
            gpt::AttentionArgs a;
            a.s = s;
            a.b = b;
            a.np = np;
            a.hn = hn;
            a.dtype = dt;
            a.flash = flash;
            a.dropout = p;
            a.seed = 1;
            void* qkv = mem.get(T * np * 3 * hn * es);
            void* out = mem.get(T * np * hn * es);
            void* dout = mem.get(T * np * hn * es);
            void* dqkv = mem.get(T * np * 3 * hn * es);
            void* saved = mem.get(be->attention_saved_bytes(a));
            double f = best_seconds(reps, [&] { be->attention_forward(a, qkv, out, saved); });
            double bw = best_seconds(reps, [&] { be->attention_backward(a, qkv, out, saved, dout, dqkv); });
            // Causal useful work: QK^T and PV forward (2 GEMMs), 4 GEMMs backward, half of s^2.
            const double flop = 2.0 * b * np * s * s * hn * 3.0;
            char name[96];
            std::snprintf(name, sizeof name, "attention %s p=%.1f fwd / bwd (ms)", flash ? "flash" : "plain", p);
            std::printf("%-44s %5.2f/%5.2f %8.1f\n", name, f * 1e3, bw * 1e3, flash ? flop / (f + bw) * 1e-9 : flop / (f + bw) * 1e-9);
        }
    }

    if (!only.empty() && only != "elementwise") return 0;
    {
        void* x = mem.get(T * h * es);
        void* y = mem.get(T * h * es);
        void* g = mem.get(h * es);
        void* bb = mem.get(h * es);
        float* mean = static_cast<float*>(mem.get(T * 4));
        float* rstd = static_cast<float*>(mem.get(T * 4));
        float* dg = static_cast<float*>(mem.get(h * 4));
        float* db = static_cast<float*>(mem.get(h * 4));
        double f = best_seconds(reps, [&] { be->layernorm_forward(x, g, bb, y, mean, rstd, T, h, 1e-5f, dt); });
        double bw = best_seconds(reps, [&] { be->layernorm_backward(y, x, g, mean, rstd, nullptr, y, dg, db, T, h, dt); });
        std::printf("%-44s %5.2f/%5.2f\n", "layernorm [T,h] fwd / bwd (ms)", f * 1e3, bw * 1e3);
        double d = best_seconds(reps, [&] { be->bias_dropout_add(x, bb, y, y, T, h, 0.1f, 1, 0, dt); });
        std::printf("%-44s %10.3f\n", "bias_dropout_add [T,h] p=0.1 (ms)", d * 1e3);
        void* u = mem.get(T * ffn * es);
        void* v = mem.get(T * ffn * es);
        double gf = best_seconds(reps, [&] { be->gelu_forward(u, v, T * ffn, false, dt); });
        double gb = best_seconds(reps, [&] { be->gelu_backward(v, u, v, T * ffn, false, dt); });
        std::printf("%-44s %5.2f/%5.2f\n", "gelu erf [T,4h] fwd / bwd (ms)", gf * 1e3, gb * 1e3);
    }
    {
        void* logits = mem.get(T * vocab * es);
        std::vector<std::int32_t> targets(T, 7);
        float* mx = static_cast<float*>(mem.get(T * 4));
        float* se = static_cast<float*>(mem.get(T * 4));
        float* tl = static_cast<float*>(mem.get(T * 4));
        float* loss = static_cast<float*>(mem.get(T * 4));
        float* dl = static_cast<float*>(mem.get(T * 4, 1.0f / T));
        double fm = best_seconds(reps, [&] { be->cross_entropy_max(logits, mx, T, vocab, dt); });
        double fs = best_seconds(reps, [&] {
            be->cross_entropy_sums(logits, targets.data(), mx, se, tl, T, vocab, 0, dt);
            be->cross_entropy_loss(mx, se, tl, loss, T);
        });
        double f1 = best_seconds(reps, [&] {
            be->cross_entropy_stats(logits, targets.data(), mx, se, tl, T, vocab, 0, dt);
        });
        void* dlog = mem.get(T * vocab * es);
        double bw = best_seconds(reps, [&] {
            be->cross_entropy_backward(logits, targets.data(), mx, se, dl, dlog, T, vocab, 0, dt);
        });
        std::printf("%-44s %5.2f/%5.2f/%5.2f\n", "cross-entropy [T,V] max / sums / bwd (ms)",
                    fm * 1e3, fs * 1e3, bw * 1e3);
        std::printf("%-44s %10.3f\n", "cross-entropy [T,V] one-pass stats (ms)", f1 * 1e3);
    }
    {
        const std::int64_t n = 16 * 1000 * 1000;  // ~gpt-tiny's parameter count
        gpt::AdamArgs a;
        a.main_param = static_cast<float*>(mem.get(n * 4));
        a.grad = static_cast<float*>(mem.get(n * 4));
        a.exp_avg = static_cast<float*>(mem.get(n * 4));
        a.exp_avg_sq = static_cast<float*>(mem.get(n * 4));
        a.n = n;
        a.lr = 1e-4f;
        a.weight_decay = 0.01f;
        double t = best_seconds(reps, [&] { be->adam_step(a); });
        double gs = best_seconds(reps, [&] { (void)be->grad_stats(a.grad, n); });
        std::printf("%-44s %5.2f/%5.2f\n", "adam / grad_stats 16M params (ms)", t * 1e3, gs * 1e3);
    }
    return 0;
}
