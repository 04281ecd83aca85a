// bench_attention: our flash attention (causal; --dropout P, default 0) forward and forward+backward on
// the attention shapes of the three GPU training configs, for bench/attention_gpu/run.sh
// to set beside PyTorch's scaled_dot_product_attention (peer_torch_attention.py, same shapes,
// same timing, same FLOP count).
//
//   bench_attention                                  # every shape but tiny, cuda, fp16
//   bench_attention --shape gpt-1.3b --reps 50
//   bench_attention --shape gpt-1.3b --dropout 0.1       # Megatron's GPT attention dropout
//   bench_attention --shape gpt-1.3b --doc-len 512       # documents of 512 tokens packed in a sample
//   bench_attention --device cpu --shape tiny --reps 2   # smoke run without a GPU
//
// Timing: device-synchronised wall time of each call (synchronize, start, run, synchronize),
// median of --reps after 3 warm-ups. FLOPs count only the causal half of the s x s scores,
// as FlashAttention's benchmarks do: forward = 2 GEMMs (QK^T, PV) of 2*b*np*s*s*hn each,
// halved = 2*b*np*s*s*hn; backward = 2.5 x forward (5 GEMMs of the same size), so
// forward+backward = 3.5 x forward.
// Output: '#' header lines, then one line per shape of key=value fields (shape, impl,
// device, dtype, b, np, s, hn, fwd_ms, fwd_tflops, fwdbwd_ms, fwdbwd_tflops, finite), or
// shape=NAME impl=ours error="..." when that shape failed (the others still run; exit 1).
//
// --doc-len N (0, the default: off, the output above unchanged): every sample is documents
// of N tokens (the last one shorter when N does not divide s), as --reset-attention-mask
// sees a packed sample with an end-of-document token closing every N-th position: doc_start
// is built by the model's own document_arrays and handed to the forward and backward in
// AttentionArgs, as the layers do. A masked kernel does only the block-diagonal causal work,
// so its TFLOP/s count that work (flop=masked): the causal half of each document,
// forward = 2*b*np*hn * (sum over a sample's documents of L*L), forward+backward = 3.5 x
// that, flop_fraction = that / the causal count. The same shape is also timed unmasked (the
// same kernels choice, doc_start null): unmasked_fwd_ms, unmasked_fwdbwd_ms and the gains
// (unmasked time / masked time; the ideal is 1 / flop_fraction), so one line shows what the
// whole-tile skipping saves. finite checks the masked outputs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/errors.hpp"
#include "core/timer.hpp"
#include "model/document_mask.hpp"

namespace {

using gpt::Backend;
using gpt::DType;

struct Shape {
    const char* name;
    std::int64_t b, np, s, hn;
};

// The attention of the GPU training configs (micro-batch, heads, sequence, head size), and a tiny
// one for CPU smoke runs (left out of "all").
constexpr Shape kShapes[] = {
    {"gpt-1.3b", 8, 16, 2048, 128},         // hidden 2048
    {"gpt2-1.5b-s1024", 16, 25, 1024, 64},  // hidden 1600
    {"gpt22b-shape", 4, 64, 2048, 96},      // hidden 6144
    {"tiny", 2, 2, 256, 64},
};
constexpr int kWarmup = 3;

struct Options {
    std::string device = "cuda";
    DType dtype = DType::F16;
    int reps = 20;
    std::string shape = "all";
    float dropout = 0.0f;  // attention dropout (Megatron's GPT configs: 0.1)
    std::int64_t doc_len = 0;  // > 0: documents of this many tokens per sample (doc_start)
};

void usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: bench_attention [--device cuda|cpu] [--dtype fp16|bf16] [--reps N (20)]\n"
                 "                       [--shape all|gpt-1.3b|gpt2-1.5b-s1024|gpt22b-shape|tiny]\n"
                 "                       [--dropout P (0: attention dropout, 0 <= P < 1)]\n"
                 "                       [--doc-len N (0: off; > 0: documents of N tokens per sample)]\n"
                 "  'all' (the default) is every shape but tiny.\n");
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            usage(stdout);
            std::exit(0);
        }
        GPT_REQUIRE(i + 1 < argc, UsageError, "unknown flag or missing value: '", a,
                    "'. HINT: bench_attention --help");
        const std::string v = argv[++i];
        if (a == "--device") {
            o.device = v;
        } else if (a == "--dtype") {
            GPT_REQUIRE(v == "fp16" || v == "bf16", UsageError, "--dtype expects fp16 or bf16, got '",
                        v, "'");
            o.dtype = gpt::parse_dtype(v);
        } else if (a == "--reps") {
            char* end = nullptr;
            const long n = std::strtol(v.c_str(), &end, 10);
            GPT_REQUIRE(!v.empty() && *end == '\0' && n > 0 && n <= 100000, UsageError,
                        "--reps expects a positive integer, got '", v, "'");
            o.reps = static_cast<int>(n);
        } else if (a == "--shape") {
            o.shape = v;
        } else if (a == "--dropout") {
            char* end = nullptr;
            const float p = std::strtof(v.c_str(), &end);
            GPT_REQUIRE(!v.empty() && *end == '\0' && p >= 0.0f && p < 1.0f, UsageError,
                        "--dropout expects a probability in [0, 1), got '", v, "'");
            o.dropout = p;
        } else if (a == "--doc-len") {
            char* end = nullptr;
            const long long n = std::strtoll(v.c_str(), &end, 10);
            GPT_REQUIRE(!v.empty() && *end == '\0' && n >= 0 && n <= (1LL << 30), UsageError,
                        "--doc-len expects a whole number of tokens (0: off), got '", v, "'");
            o.doc_len = n;
        } else {
            GPT_THROW(UsageError, "unknown flag '", a, "'. HINT: bench_attention --help");
        }
    }
    const bool known = o.shape == "all" ||
                       std::any_of(std::begin(kShapes), std::end(kShapes),
                                   [&](const Shape& s) { return o.shape == s.name; });
    GPT_REQUIRE(known, UsageError, "unknown --shape '", o.shape,
                "' (expected all, gpt-1.3b, gpt2-1.5b-s1024, gpt22b-shape or tiny)");
    return o;
}

// Device buffers of one shape, freed when it is done (also when it failed).
struct Buffers {
    Backend& be;
    std::vector<void*> ptrs;
    void* get(std::size_t bytes) {
        void* p = be.alloc(bytes);
        ptrs.push_back(p);
        return p;
    }
    ~Buffers() {
        for (void* p : ptrs) be.free(p);
    }
};

// Uniform(-1, 1) values in `dtype`: q.k over hn elements then has a spread like a trained
// model's scores (std ~ sqrt(hn/3) * 1/sqrt(hn)), so the softmax is neither flat nor one-hot.
// Filled through an fp32 staging chunk cast on the device: no full-size fp32 twin.
void fill_random(Backend& be, void* p, std::int64_t n, DType dtype, std::uint32_t seed) {
    constexpr std::int64_t kChunk = 1 << 20;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> host(static_cast<std::size_t>(std::min(n, kChunk)));
    for (float& x : host) x = u(rng);
    float* stage = static_cast<float*>(be.alloc(host.size() * sizeof(float)));
    be.copy_to_device(stage, host.data(), host.size() * sizeof(float));
    char* dst = static_cast<char*>(p);
    // The same chunk repeated at shifting offsets; different heads still see different data.
    for (std::int64_t i = 0; i < n; i += kChunk) {
        const std::int64_t len = std::min(kChunk, n - i);
        be.cast(stage, DType::F32, dst + i * gpt::dtype_size(dtype), dtype, len);
    }
    be.synchronize();
    be.free(stage);
}

// Median of reps of one device-synchronised call, after kWarmup untimed ones.
double median_seconds(Backend& be, int reps, const std::function<void()>& f) {
    for (int i = 0; i < kWarmup; ++i) f();
    std::vector<double> t(static_cast<std::size_t>(reps));
    for (double& x : t) {
        be.synchronize();
        gpt::Stopwatch sw;
        f();
        be.synchronize();
        x = sw.seconds();
    }
    std::sort(t.begin(), t.end());
    const std::size_t m = t.size() / 2;
    return t.size() % 2 ? t[m] : 0.5 * (t[m - 1] + t[m]);
}

// Every element of a `dtype` buffer finite (through an fp32 copy and grad_stats).
bool all_finite(Backend& be, Buffers& mem, const void* p, std::int64_t n, DType dtype) {
    float* f = static_cast<float*>(mem.get(static_cast<std::size_t>(n) * sizeof(float)));
    be.cast(p, dtype, f, DType::F32, n);
    return be.grad_stats(f, n).finite;
}

// doc_start under documents of doc_len tokens, built as training builds it: inputs with an
// end-of-document token closing every doc_len-th position (an EOD belongs to the document it
// ends), read by the model's document_arrays. [b, s], host memory.
std::vector<std::int32_t> document_starts(std::int64_t b, std::int64_t s, std::int64_t doc_len) {
    constexpr std::int32_t kEod = 1;  // any id; the other tokens are 0
    const std::int64_t stride = s + 1;  // the loader's sample: s inputs and the last label
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(b * stride), 0);
    for (std::int64_t bi = 0; bi < b; ++bi) {
        for (std::int64_t j = doc_len - 1; j < s; j += doc_len) tokens[bi * stride + j] = kEod;
    }
    std::vector<std::int32_t> doc_start(static_cast<std::size_t>(b * s));
    gpt::model::document_arrays(tokens.data(), b, s, stride, kEod, nullptr, doc_start.data());
    return doc_start;
}

// Sum over every sample's documents of L*L, read back from doc_start itself (a document: a run
// of rows with the same first key), so the FLOP count follows what the kernels are given.
double document_square_sum(const std::vector<std::int32_t>& doc_start, std::int64_t b, std::int64_t s) {
    double sum = 0.0;
    for (std::int64_t bi = 0; bi < b; ++bi) {
        std::int64_t len = 0;
        for (std::int64_t j = 0; j < s; ++j) {
            if (j > 0 && doc_start[bi * s + j] != doc_start[bi * s + j - 1]) {
                sum += double(len) * double(len);
                len = 0;
            }
            ++len;
        }
        sum += double(len) * double(len);
    }
    return sum;
}

struct Times {
    double fwd, fwdbwd;  // seconds
};

Times time_attention(Backend& be, int reps, const gpt::AttentionArgs& a, void* qkv, void* out, void* saved,
                     void* dout, void* dqkv) {
    Times t{};
    t.fwd = median_seconds(be, reps, [&] { be.attention_forward(a, qkv, out, saved); });
    t.fwdbwd = median_seconds(be, reps, [&] {
        be.attention_forward(a, qkv, out, saved);
        be.attention_backward(a, qkv, out, saved, dout, dqkv);
    });
    return t;
}

void run_shape(Backend& be, const Options& o, const Shape& sh) {
    Buffers mem{be, {}};
    gpt::AttentionArgs a;
    a.s = sh.s;
    a.b = sh.b;
    a.np = sh.np;
    a.hn = sh.hn;
    a.dtype = o.dtype;
    a.flash = true;
    a.dropout = o.dropout;
    a.seed = 1;
    a.offset = 0;  // the Philox offset of a training step's first layer
    const std::int64_t tokens = sh.s * sh.b;
    const std::int64_t n_qkv = tokens * sh.np * 3 * sh.hn, n_out = tokens * sh.np * sh.hn;
    const std::size_t es = gpt::dtype_size(o.dtype);
    void* qkv = mem.get(n_qkv * es);   // [s, b*np, 3, hn]
    void* out = mem.get(n_out * es);   // [s, b*np, hn]
    void* dout = mem.get(n_out * es);  // [s, b*np, hn]
    void* dqkv = mem.get(n_qkv * es);  // [s, b*np, 3, hn]
    // The masked call's arguments: doc_start in device memory, as the model's arena holds it.
    gpt::AttentionArgs masked = a;
    std::vector<std::int32_t> starts;
    if (o.doc_len > 0) {
        starts = document_starts(sh.b, sh.s, o.doc_len);
        const std::size_t bytes = starts.size() * sizeof(std::int32_t);
        auto* doc_start = static_cast<std::int32_t*>(mem.get(bytes));
        be.copy_to_device(doc_start, starts.data(), bytes);
        masked.doc_start = doc_start;
    }
    void* saved = mem.get(std::max(be.attention_saved_bytes(a), be.attention_saved_bytes(masked)));
    fill_random(be, qkv, n_qkv, o.dtype, 1);
    fill_random(be, dout, n_out, o.dtype, 2);

    const double causal_fwd_flop = 2.0 * sh.b * sh.np * double(sh.s) * sh.s * sh.hn;  // causal half
    const std::string dtype(gpt::dtype_name(o.dtype));
    if (o.doc_len == 0) {
        const Times t = time_attention(be, o.reps, a, qkv, out, saved, dout, dqkv);
        const bool finite = all_finite(be, mem, out, n_out, o.dtype) && all_finite(be, mem, dqkv, n_qkv, o.dtype);
        const double fwd_flop = causal_fwd_flop, fwdbwd_flop = 3.5 * fwd_flop;
        std::printf("shape=%s impl=ours device=%s dtype=%s dropout=%g b=%lld np=%lld s=%lld hn=%lld "
                    "fwd_ms=%.4f fwd_tflops=%.4f fwdbwd_ms=%.4f fwdbwd_tflops=%.4f finite=%d\n",
                    sh.name, o.device.c_str(), dtype.c_str(), o.dropout, static_cast<long long>(sh.b),
                    static_cast<long long>(sh.np), static_cast<long long>(sh.s), static_cast<long long>(sh.hn),
                    t.fwd * 1e3, fwd_flop / t.fwd * 1e-12, t.fwdbwd * 1e3, fwdbwd_flop / t.fwdbwd * 1e-12,
                    finite ? 1 : 0);
        std::fflush(stdout);
        return;
    }
    // The unmasked baseline first, then the masked call, whose outputs stay for the check.
    const Times plain = time_attention(be, o.reps, a, qkv, out, saved, dout, dqkv);
    const Times doc = time_attention(be, o.reps, masked, qkv, out, saved, dout, dqkv);
    const bool finite = all_finite(be, mem, out, n_out, o.dtype) && all_finite(be, mem, dqkv, n_qkv, o.dtype);
    // Each document's causal half (L*L/2 scores, the convention of the causal count's s*s/2).
    const double fwd_flop = 2.0 * sh.np * sh.hn * document_square_sum(starts, sh.b, sh.s);
    const double fwdbwd_flop = 3.5 * fwd_flop;
    const long long docs = (sh.s + o.doc_len - 1) / o.doc_len;  // per sample, the last maybe shorter
    std::printf("shape=%s impl=ours device=%s dtype=%s dropout=%g doc_len=%lld docs=%lld flop=masked "
                "flop_fraction=%.4f b=%lld np=%lld s=%lld hn=%lld fwd_ms=%.4f fwd_tflops=%.4f fwdbwd_ms=%.4f "
                "fwdbwd_tflops=%.4f unmasked_fwd_ms=%.4f unmasked_fwdbwd_ms=%.4f fwd_gain=%.3f fwdbwd_gain=%.3f "
                "finite=%d\n",
                sh.name, o.device.c_str(), dtype.c_str(), o.dropout, static_cast<long long>(o.doc_len), docs,
                fwd_flop / causal_fwd_flop, static_cast<long long>(sh.b), static_cast<long long>(sh.np),
                static_cast<long long>(sh.s), static_cast<long long>(sh.hn), doc.fwd * 1e3,
                fwd_flop / doc.fwd * 1e-12, doc.fwdbwd * 1e3, fwdbwd_flop / doc.fwdbwd * 1e-12, plain.fwd * 1e3,
                plain.fwdbwd * 1e3, plain.fwd / doc.fwd, plain.fwdbwd / doc.fwdbwd, finite ? 1 : 0);
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    int rc = 0;
    try {
        const Options o = parse(argc, argv);
        auto be = gpt::make_backend(o.device, 0);
        // The causal run's header stays byte for byte the old one, so its logs compare with earlier ones.
        const std::string masking =
            o.doc_len > 0 ? "causal within documents of " + std::to_string(o.doc_len) + " tokens (doc_start)"
                          : std::string("causal");
        std::printf("# bench_attention: flash attention, %s, dropout %g, device %s (%s), dtype %s; "
                    "median of %d reps after %d warm-ups, device-synchronised wall time\n",
                    masking.c_str(), o.dropout, o.device.c_str(), be->name().c_str(),
                    std::string(gpt::dtype_name(o.dtype)).c_str(), o.reps, kWarmup);
        std::printf("# layout: qkv [s, b*np, 3, hn] (Megatron's interleaved q,k,v per head), "
                    "out/dout [s, b*np, hn]\n");
        if (o.doc_len == 0) {
            std::printf("# FLOPs count the causal half only (as FlashAttention's benchmarks): "
                        "fwd = 2*b*np*s*s*hn, fwd+bwd = 3.5 x fwd\n");
        } else {
            std::printf("# FLOPs count the masked work only (flop=masked): each document's causal half, "
                        "fwd = 2*b*np*hn*(sum of L*L over a sample's documents), fwd+bwd = 3.5 x fwd; "
                        "flop_fraction = that / the causal count 2*b*np*s*s*hn\n");
            std::printf("# unmasked_*_ms: the same shape and kernels without doc_start; *_gain = unmasked time / "
                        "masked time (ideal: 1 / flop_fraction)\n");
        }
        std::fflush(stdout);
        for (const Shape& sh : kShapes) {
            const bool wanted = o.shape == "all" ? std::string(sh.name) != "tiny" : o.shape == sh.name;
            if (!wanted) continue;
            try {
                run_shape(*be, o, sh);
            } catch (const std::exception& e) {
                // One shape's failure (an unsupported head size, out of memory) is its row's
                // error; the other shapes still run.
                std::string msg = e.what();
                std::replace(msg.begin(), msg.end(), '"', '\'');
                std::replace(msg.begin(), msg.end(), '\n', ' ');
                std::printf("shape=%s impl=ours error=\"%s\"\n", sh.name, msg.c_str());
                std::fflush(stdout);
                std::cerr << "bench_attention: " << sh.name << ": error: " << e.what() << "\n";
                rc = 1;
            }
        }
    } catch (const gpt::UsageError& e) {
        std::cerr << "bench_attention: " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::fflush(stdout);
        std::cerr << "bench_attention: error: " << e.what() << "\n";
        return 1;
    }
    return rc;
}
