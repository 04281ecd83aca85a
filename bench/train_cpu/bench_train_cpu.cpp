// bench_train_cpu: training throughput of one CPU process on gpt-tiny (or a shape from the
// flags), the same work as /work/shared/peers/peer_torch_cpu.py: fp32, no dropout, AdamW
// with clipping, random tokens. Prints one JSON line: tokens/s, model GFLOP/s (Megatron's
// formula), and peak memory (backend high-water mark and process max RSS).
#include <mpi.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "backend/backend.hpp"
#include "backend/cpu/blas.hpp"
#include "common/random_tokens.hpp"
#include "common/timed_backend.hpp"
#include "core/timer.hpp"
#include "dist/process_groups.hpp"
#include "train/monitor/iteration_log.hpp"
#include "train/trainer.hpp"

namespace {

using gpt::bench::RandomTokens;

int arg(int argc, char** argv, const std::string& name, int def) {
    for (int i = 1; i + 1 < argc; ++i)
        if (argv[i] == name) return std::atoi(argv[i + 1]);
    return def;
}
std::string str_arg(int argc, char** argv, const std::string& name) {
    for (int i = 1; i + 1 < argc; ++i)
        if (argv[i] == name) return argv[i + 1];
    return "";
}

// --dump DIR: the initial parameters (flat fp32 + layout), the token batches and our
// per-step losses, for bench/train_cpu/compare_with_peer.py to replay in PyTorch.
void dump_initial_state(const std::string& dir, gpt::train::Trainer& tr, const RandomTokens& src) {
    auto& m = tr.chunks().chunk(0);
    std::vector<float> p(static_cast<std::size_t>(m.layout().total_elements()));
    m.get_parameters(p.data());
    std::ofstream(dir + "/params.bin", std::ios::binary)
        .write(reinterpret_cast<const char*>(p.data()), static_cast<std::streamsize>(p.size() * 4));
    std::ofstream layout(dir + "/layout.txt");
    for (const auto& e : m.layout().entries()) {
        layout << e.name << " " << e.offset;
        for (auto d : e.global_shape) layout << " " << d;
        layout << "\n";
    }
    std::ofstream tok(dir + "/tokens.bin", std::ios::binary);
    for (const auto& b : src.batches())
        tok.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size() * 4));
}

bool flag(int argc, char** argv, const std::string& name) {
    for (int i = 1; i < argc; ++i)
        if (argv[i] == name) return true;
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rc = 0;
    try {
        gpt::Config cfg;
        cfg.model.num_layers = arg(argc, argv, "--num-layers", 4);
        cfg.model.hidden_size = arg(argc, argv, "--hidden-size", 256);
        cfg.model.num_attention_heads = arg(argc, argv, "--num-attention-heads", 4);
        cfg.model.seq_length = arg(argc, argv, "--seq-length", 256);
        cfg.model.vocab_size = arg(argc, argv, "--vocab-size", 50304);
        cfg.model.hidden_dropout = 0.0;  // the peer has no dropout
        cfg.model.attention_dropout = 0.0;
        cfg.training.micro_batch_size = arg(argc, argv, "--micro-batch-size", 8);
        cfg.training.global_batch_size = cfg.training.micro_batch_size;
        const int warmup = arg(argc, argv, "--warmup", 2), steps = arg(argc, argv, "--steps", 8);
        cfg.training.train_iters = warmup + steps;
        cfg.training.fp16 = flag(argc, argv, "--fp16");
        cfg.training.bf16 = flag(argc, argv, "--bf16");
        cfg.parallel.use_flash_attn = flag(argc, argv, "--use-flash-attn");
        cfg.optimizer.lr = 1e-4;
        cfg.optimizer.lr_decay_style = gpt::LrDecayStyle::Constant;
        cfg.logging.log_interval = 1000000;

        gpt::dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
        auto cpu = gpt::make_backend("cpu", 0);
        // --profile: time every backend call (adds a clock read per call; small vs the ops).
        const bool profile = flag(argc, argv, "--profile");
        std::unique_ptr<gpt::bench::TimedBackend> timed;
        if (profile) timed = std::make_unique<gpt::bench::TimedBackend>(*cpu);
        gpt::Backend* be = profile ? static_cast<gpt::Backend*>(timed.get()) : cpu.get();
        gpt::train::Trainer tr(cfg, groups, *be);
        RandomTokens src(static_cast<int>(cfg.model.vocab_size), cfg.model.seq_length,
                         cfg.training.micro_batch_size);
        const std::string dump = str_arg(argc, argv, "--dump");
        if (!dump.empty()) {
            dump_initial_state(dump, tr, src);
            std::ofstream losses(dump + "/ours.txt");
            losses.precision(10);
            for (int i = 0; i < warmup + steps; ++i) losses << tr.train_step(src).lm_loss << "\n";
            MPI_Finalize();
            return 0;
        }
        for (int i = 0; i < warmup; ++i) tr.train_step(src);
        if (timed) timed->reset();
        gpt::Stopwatch sw;
        double loss = 0;
        for (int i = 0; i < steps; ++i) loss = tr.train_step(src).lm_loss;
        const double dt = sw.seconds() / steps;
        const auto& m = cfg.model;
        const double B = cfg.training.micro_batch_size;
        const double flops = gpt::train::model_flops_per_iteration(m, tr.chunks().chunk(0).dims().vocab_padded,
                                                                   cfg.training.micro_batch_size);
        struct rusage ru {};
        getrusage(RUSAGE_SELF, &ru);
        const char* threads = std::getenv("OMP_NUM_THREADS");
        std::printf("{\"impl\": \"gpt-pretrain-cpu\", \"config\": \"gpt-tiny\", \"threads\": \"%s\", "
                    "\"layers\": %d, \"hidden\": %d, \"heads\": %d, \"seq\": %d, \"micro_batch\": %d, "
                    "\"dtype\": \"%s\", \"flash\": %s, \"ms_per_iter\": %.1f, \"tokens_per_s\": %.0f, "
                    "\"model_gflops\": %.1f, \"peak_backend_mib\": %.1f, \"max_rss_mib\": %.1f, "
                    "\"loss\": %.3f, \"blas_core\": \"%s\"}\n",
                    threads ? threads : "default", m.num_layers, m.hidden_size, m.num_attention_heads,
                    m.seq_length, cfg.training.micro_batch_size,
                    cfg.training.fp16 ? "fp16" : (cfg.training.bf16 ? "bf16" : "fp32"),
                    cfg.parallel.use_flash_attn ? "true" : "false", dt * 1000, B * m.seq_length / dt,
                    flops / dt / 1e9, be->peak_bytes() / 1048576.0, ru.ru_maxrss / 1024.0, loss,
                    // The OpenBLAS kernel set the backend ended up with (run.sh picks the fastest).
                    gpt::cpu::ensure_blas_kernels().c_str());
        if (timed) {
            std::fprintf(stderr, "per-op time over %d iterations:\n", steps);
            timed->print(stderr);
        }
    } catch (const std::exception& e) {
        std::cerr << "bench_train_cpu: error: " << e.what() << "\n";
        rc = 1;
    }
    MPI_Finalize();
    return rc;
}
