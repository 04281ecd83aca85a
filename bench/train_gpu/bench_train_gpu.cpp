// bench_train_gpu: training throughput of one GPU on the GPU training shapes, the same work
// as /work/shared/peers/peer_torch_gpt.py: fp16 with dynamic loss scaling, flash attention,
// no dropout, AdamW (lr 1e-4 constant) with clipping at 1.0, vocab 50304, random tokens.
// Prints one JSON line with the peer's keys: model TFLOP/s (Megatron's formula
// 72 B s l h^2 (1 + s/6h + V/12hl), no causal discount), tokens/s and peak memory.
//
//   bench_train_gpu --config gpt-1.3b                  # 6 warm-up + 20 timed iterations
//   bench_train_gpu --config gpt-1.3b --profile        # plus per-op/per-category times (stderr)
//   bench_train_gpu --device cpu --config tiny --profile   # smoke run without a GPU
//
// --profile runs extra iterations after the timed ones with every backend op synchronized,
// so the JSON line is never slowed by the profiling. The kernel variants the run-time
// switches chose (GPT_CUDA_FLASH, GPT_CUDA_GEMM_EPILOGUE: README.md, "Kernel switches") head stderr
// and are the JSON line's "kernels", so a log says what it measured.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "common/random_tokens.hpp"
#include "common/timed_backend.hpp"
#include "config/validate.hpp"
#include "core/environment.hpp"
#include "core/errors.hpp"
#include "core/timer.hpp"
#include "dist/process_groups.hpp"
#include "train/monitor/iteration_log.hpp"
#include "train/trainer.hpp"

namespace {

struct Shape {
    int layers, hidden, heads, seq, micro_batch;
};

// The rows (and the peer's), plus a tiny one for CPU smoke runs.
const std::map<std::string, Shape>& presets() {
    static const std::map<std::string, Shape> p = {
        {"gpt-1.3b", {24, 2048, 16, 2048, 8}},
        {"gpt2-1.5b-s1024", {48, 1600, 25, 1024, 16}},
        {"gpt22b-shape-4layers", {4, 6144, 64, 2048, 4}},
        {"tiny", {2, 128, 4, 128, 2}},
    };
    return p;
}

// H200 fp16 cuBLAS GEMM peak, measured on our H200; --gemm-peak-tflops for other GPUs.
constexpr double kDefaultGemmPeakTflops = 762.0;

struct Options {
    std::string config = "gpt-1.3b";
    std::string device = "cuda";
    // fp16 (the peer's), bf16, or fp8: bf16 with --fp8-format hybrid and Megatron's default
    // delayed scaling (issue 34's rows).
    std::string precision = "fp16";
    int steps = 20, warmup = 6;  // the peer's counts
    int profile_steps = 0;       // 0: --steps
    bool profile = false;
    bool help = false;
    double gemm_peak_tflops = 0;  // 0: kDefaultGemmPeakTflops on cuda, none on cpu
    // Shape overrides (0: the preset's).
    int num_layers = 0, hidden_size = 0, num_attention_heads = 0, seq_length = 0,
        micro_batch_size = 0, vocab_size = 50304;
};

void usage(std::FILE* out) {
    std::fprintf(out,
                 "usage: bench_train_gpu [--config gpt-1.3b|gpt2-1.5b-s1024|gpt22b-shape-4layers|tiny]\n"
                 "                       [--device cuda|cpu] [--precision fp16|bf16|fp8] [--steps N] [--warmup N]\n"
                 "                       [--profile] [--profile-steps N] [--gemm-peak-tflops X (default 762, H200)]\n"
                 "                       [--num-layers N] [--hidden-size N] [--num-attention-heads N]\n"
                 "                       [--seq-length N] [--micro-batch-size N] [--vocab-size N]\n");
}

int to_int(const std::string& flag, const std::string& v) {
    char* end = nullptr;
    const long x = std::strtol(v.c_str(), &end, 10);
    GPT_REQUIRE(!v.empty() && *end == '\0' && x >= 0 && x <= 1L << 30, UsageError, flag,
                " expects a non-negative integer, got '", v, "'");
    return static_cast<int>(x);
}

Options parse(int argc, char** argv) {
    Options o;
    const std::map<std::string, int*> ints = {
        {"--steps", &o.steps},
        {"--warmup", &o.warmup},
        {"--profile-steps", &o.profile_steps},
        {"--num-layers", &o.num_layers},
        {"--hidden-size", &o.hidden_size},
        {"--num-attention-heads", &o.num_attention_heads},
        {"--seq-length", &o.seq_length},
        {"--micro-batch-size", &o.micro_batch_size},
        {"--vocab-size", &o.vocab_size},
    };
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            o.help = true;
            continue;
        }
        if (a == "--profile") {
            o.profile = true;
            continue;
        }
        GPT_REQUIRE(i + 1 < argc, UsageError, "unknown flag or missing value: '", a,
                    "'. HINT: bench_train_gpu --help");
        const std::string v = argv[++i];
        if (a == "--config") o.config = v;
        else if (a == "--device") o.device = v;
        else if (a == "--precision") o.precision = v;
        else if (a == "--gemm-peak-tflops") o.gemm_peak_tflops = std::atof(v.c_str());
        else if (auto it = ints.find(a); it != ints.end()) *it->second = to_int(a, v);
        else GPT_THROW(UsageError, "unknown flag '", a, "'. HINT: bench_train_gpu --help");
    }
    GPT_REQUIRE(presets().count(o.config), UsageError, "unknown --config '", o.config,
                "' (expected gpt-1.3b, gpt2-1.5b-s1024, gpt22b-shape-4layers or tiny)");
    GPT_REQUIRE(o.steps > 0, UsageError, "--steps must be positive");
    GPT_REQUIRE(o.precision == "fp16" || o.precision == "bf16" || o.precision == "fp8", UsageError,
                "--precision must be fp16, bf16 or fp8, got '", o.precision, "'");
    if (o.profile_steps == 0) o.profile_steps = o.steps;
    return o;
}

gpt::Config make_config(const Options& o, std::string& name) {
    const Shape p = presets().at(o.config);
    const auto pick = [](int given, int preset) { return given > 0 ? given : preset; };
    gpt::Config cfg;
    cfg.model.num_layers = pick(o.num_layers, p.layers);
    cfg.model.hidden_size = pick(o.hidden_size, p.hidden);
    cfg.model.num_attention_heads = pick(o.num_attention_heads, p.heads);
    cfg.model.seq_length = pick(o.seq_length, p.seq);
    cfg.model.vocab_size = o.vocab_size;
    cfg.model.hidden_dropout = 0.0;  // the peer has no dropout
    cfg.model.attention_dropout = 0.0;
    cfg.training.micro_batch_size = pick(o.micro_batch_size, p.micro_batch);
    cfg.training.global_batch_size = cfg.training.micro_batch_size;
    cfg.training.train_iters = o.warmup + o.steps + (o.profile ? o.profile_steps : 0);
    cfg.training.fp16 = o.precision == "fp16";
    cfg.training.bf16 = !cfg.training.fp16;
    if (o.precision == "fp8") cfg.fp8.fp8_format = gpt::Fp8Scheme::Hybrid;
    // Dynamic scaling (fp16) from 4096 rather than Megatron's 2^32, so the first iterations are not
    // skipped for overflow while the scale comes down (a skipped step has no optimizer work).
    cfg.training.initial_loss_scale = 4096.0;
    cfg.parallel.use_flash_attn = true;
    cfg.parallel.device = gpt::parse_enum<gpt::DeviceKind>(o.device, "device");
    cfg.optimizer.lr = 1e-4;
    cfg.optimizer.lr_decay_style = gpt::LrDecayStyle::Constant;
    cfg.optimizer.clip_grad = 1.0;
    cfg.logging.log_interval = 1000000;
    gpt::validate(cfg, 1);

    const bool custom = cfg.model.num_layers != p.layers || cfg.model.hidden_size != p.hidden ||
                        cfg.model.num_attention_heads != p.heads || cfg.model.seq_length != p.seq ||
                        cfg.training.micro_batch_size != p.micro_batch || o.vocab_size != 50304;
    name = (custom ? o.config + "-custom" : o.config) + (o.precision == "fp16" ? "" : "-" + o.precision);
    return cfg;
}

// "512.3 TFLOP/s", or GFLOP/s below one TFLOP/s (CPU runs).
std::string rate(double flops_per_s) {
    char buf[32];
    if (flops_per_s >= 1e12) std::snprintf(buf, sizeof buf, "%.1f TFLOP/s", flops_per_s / 1e12);
    else std::snprintf(buf, sizeof buf, "%.1f GFLOP/s", flops_per_s / 1e9);
    return buf;
}

// The --profile report: the per-op table, the per-category breakdown per iteration and the
// distance to the GEMM ceiling.
void print_profile(const gpt::bench::TimedBackend& timed, const Options& o, const std::string& name,
                   int iters, double profiled_s_per_iter, double timed_s_per_iter, double model_flops) {
    using gpt::bench::OpCategory;
    std::FILE* out = stderr;
    const bool gpu = o.device != "cpu";
    std::fprintf(out, "\nprofile of %s on %s: %d iterations after the timed ones%s\n", name.c_str(),
                 o.device.c_str(), iters,
                 gpu ? ", every op synchronized (adds a few us of launch + sync per op)" : "");
    std::fprintf(out, "per-op time over %d iterations:\n", iters);
    timed.print(out);

    const double per = 1.0 / iters;
    std::fprintf(out, "\nper-iteration breakdown (profiled iteration %.1f ms, unprofiled %.1f ms):\n",
                 profiled_s_per_iter * 1e3, timed_s_per_iter * 1e3);
    std::fprintf(out, "  %-16s %10s %7s\n", "category", "ms/iter", "share");
    for (OpCategory c : gpt::bench::kOpCategories) {
        const double s = timed.category_seconds(c) * per;
        std::fprintf(out, "  %-16s %10.2f %6.1f%%", gpt::bench::op_category_name(c), s * 1e3,
                     100 * s / profiled_s_per_iter);
        if (c == OpCategory::Gemm && timed.category_seconds(c) > 0)
            std::fprintf(out, "   %s over %.3g TFLOP of GEMMs",
                         rate(timed.gemm_flops() / timed.category_seconds(c)).c_str(),
                         timed.gemm_flops() * per / 1e12);
        if (c == OpCategory::Communication) std::fprintf(out, "   (one rank: no collectives)");
        std::fprintf(out, "\n");
    }
    const double outside = profiled_s_per_iter - timed.total_seconds() * per;
    std::fprintf(out, "  %-16s %10.2f %6.1f%%   (host code, allocation, launch gaps)\n",
                 "outside backend", outside * 1e3, 100 * outside / profiled_s_per_iter);

    const double gemm_share = timed.category_seconds(OpCategory::Gemm) * per / profiled_s_per_iter;
    if (!gpu && o.gemm_peak_tflops <= 0) {
        std::fprintf(out, "GEMM ceiling: no GEMM peak known for %s (--gemm-peak-tflops X); GEMMs take "
                     "%.1f%% of the profiled iteration\n", o.device.c_str(), 100 * gemm_share);
        return;
    }
    const double peak = (o.gemm_peak_tflops > 0 ? o.gemm_peak_tflops : kDefaultGemmPeakTflops) * 1e12;
    const double ceiling_s = model_flops / peak;
    std::fprintf(out,
                 "GEMM ceiling: %.4g TFLOP of model work per iteration at %.4g TFLOP/s%s = %.1f ms/iter; "
                 "measured %.1f ms/iter, %.2fx the ceiling (model TFLOP/s at %.1f%% of the peak)\n",
                 model_flops / 1e12, peak / 1e12,
                 o.gemm_peak_tflops > 0 ? "" : " (H200 fp16 cuBLAS peak; --gemm-peak-tflops for others)",
                 ceiling_s * 1e3, timed_s_per_iter * 1e3, timed_s_per_iter / ceiling_s,
                 100 * ceiling_s / timed_s_per_iter);
    std::fprintf(out,
                 "  GEMMs issued: %.4g TFLOP/iter, %.1f ms at the peak vs %.1f ms measured (%.1f%% of "
                 "the iteration)\n",
                 timed.gemm_flops() * per / 1e12, timed.gemm_flops() * per / peak * 1e3,
                 timed.category_seconds(OpCategory::Gemm) * per * 1e3, 100 * gemm_share);
}

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rc = 0;
    try {
        const Options o = parse(argc, argv);
        if (o.help) {
            usage(stdout);
            MPI_Finalize();
            return 0;
        }
        std::string name;
        gpt::Config cfg = make_config(o, name);

        gpt::dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
        GPT_REQUIRE(groups.world_size() == 1, UsageError,
                    "bench_train_gpu measures one GPU; run it without mpirun (world size ",
                    groups.world_size(), ")");
        gpt::train::check_supported(cfg, groups);
        auto device = gpt::make_backend(o.device, 0);
        std::string kernels = device->kernel_variants();
        if (kernels.empty()) kernels = o.device + " reference kernels";
        // The model's own switches (not kernels of the backend): where FP8 inputs are cast,
        // where an FP8 layer's GELU runs, where its bias gradients are summed.
        if (o.precision == "fp8") {
            kernels += gpt::env::fp8_input_cast_separate() ? " fp8_input_cast=separate" : " fp8_input_cast=fused";
            kernels += gpt::env::fp8_gelu_epilogue() ? " fp8_gelu=epilogue" : " fp8_gelu=pass";
            kernels += gpt::env::fp8_bias_grad_separate() ? " fp8_bias_grad=separate" : " fp8_bias_grad=fused";
        }
        std::fprintf(stderr, "bench_train_gpu: %s on %s, %s, kernels: %s\n", name.c_str(), o.device.c_str(),
                     o.precision.c_str(), kernels.c_str());
        // The decorator stays in place for the timed iterations too (disabled: a plain
        // forwarder, one virtual call per op), so both phases run the same code.
        gpt::bench::TimedBackend timed(*device, /*sync_each_op=*/!device->host_memory());
        timed.set_enabled(false);
        gpt::train::Trainer tr(cfg, groups, timed);
        gpt::bench::RandomTokens src(cfg.model.vocab_size, cfg.model.seq_length,
                                     cfg.training.micro_batch_size);

        for (int i = 0; i < o.warmup; ++i) tr.train_step(src);
        timed.synchronize();
        gpt::Stopwatch sw;
        double loss = 0;
        int skipped = 0;
        for (int i = 0; i < o.steps; ++i) {
            const auto r = tr.train_step(src);
            loss = r.lm_loss;
            skipped += r.skipped;
        }
        timed.synchronize();
        const double dt = sw.seconds() / o.steps;

        const auto& m = cfg.model;
        const int B = cfg.training.micro_batch_size;
        const double flops = gpt::train::model_flops_per_iteration(m, tr.chunks().chunk(0).dims().vocab_padded, B);
        const double tflops = flops / dt / 1e12;  // 4 decimals for CPU-sized numbers
        std::int64_t params = 0;
        for (const auto& e : tr.chunks().chunk(0).layout().entries()) params += e.numel;
        std::printf("{\"impl\": \"gpt-pretrain-%s\", \"config\": \"%s\", \"layers\": %d, \"hidden\": %d, "
                    "\"heads\": %d, \"seq\": %d, \"micro_batch\": %d, \"params_b\": %.3f, "
                    "\"ms_per_iter\": %.1f, \"tokens_per_s\": %.0f, \"model_tflops\": %.*f, "
                    "\"peak_mem_gib\": %.1f, \"loss\": %.3f, \"skipped_steps\": %d, \"kernels\": \"%s\"}\n",
                    o.device.c_str(), name.c_str(), m.num_layers, m.hidden_size, m.num_attention_heads,
                    m.seq_length, B, params / 1e9, dt * 1e3, double(B) * m.seq_length / dt,
                    tflops < 1 ? 4 : 1, tflops, timed.peak_bytes() / double(1ull << 30), loss, skipped,
                    kernels.c_str());
        std::fflush(stdout);

        if (o.profile) {
            timed.reset();
            timed.set_enabled(true);
            timed.synchronize();
            gpt::Stopwatch psw;
            for (int i = 0; i < o.profile_steps; ++i) tr.train_step(src);
            timed.synchronize();
            const double pdt = psw.seconds() / o.profile_steps;
            timed.set_enabled(false);
            print_profile(timed, o, name, o.profile_steps, pdt, dt, flops);
        }
    } catch (const std::exception& e) {
        std::fflush(stdout);
        std::cerr << "bench_train_gpu: error: " << e.what() << "\n";
        rc = 1;
    }
    MPI_Finalize();
    return rc;
}
