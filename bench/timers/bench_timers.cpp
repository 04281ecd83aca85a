// bench_timers: what Megatron's per-phase timers cost. One CPU process trains a small GPT
// (log interval 1, so every iteration also gathers and formats the timer block) with the
// step's phase hooks removed ("hooks off": the peer), and at --timing-log-level 0, 1, 2.
// The variants alternate within each run, so machine load drifts over all of them alike.
// Prints one row per variant: median, min and max ms per iteration over the runs, and the
// median's overhead over "hooks off".
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "common/random_tokens.hpp"
#include "core/timer.hpp"
#include "dist/process_groups.hpp"
#include "log/log.hpp"
#include "train/trainer.hpp"

namespace {

int arg(int argc, char** argv, const std::string& name, int def) {
    for (int i = 1; i + 1 < argc; ++i)
        if (argv[i] == name) return std::atoi(argv[i + 1]);
    return def;
}

gpt::Config bench_config(int iters) {
    gpt::Config c;
    c.model.num_layers = 2;
    c.model.hidden_size = 128;
    c.model.num_attention_heads = 4;
    c.model.seq_length = 128;
    c.model.vocab_size = 1024;
    c.model.hidden_dropout = 0.0;
    c.model.attention_dropout = 0.0;
    c.training.micro_batch_size = 4;
    c.training.global_batch_size = 8;  // two micro-batches: the pipeline's loop runs twice
    c.training.train_iters = iters;
    c.training.eval_iters = 0;
    c.optimizer.lr = 1e-4;
    c.logging.log_interval = 1;
    return c;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    const int runs = arg(argc, argv, "--runs", 5), iters = arg(argc, argv, "--iters", 20);
    gpt::log::Options lo;
    lo.level = "warning";  // the lines are still formatted; only their printing is left out
    gpt::log::init(lo);
    struct Variant {
        const char* name;
        int level;  // -1: hooks off
        std::vector<double> ms;
    };
    std::vector<Variant> variants{{"hooks off (peer)", -1, {}}, {"level 0 (default)", 0, {}},
                                  {"level 1", 1, {}}, {"level 2", 2, {}}};
    {
        gpt::dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
        for (int r = 0; r < runs; ++r)
            for (auto& v : variants) {
                gpt::Config cfg = bench_config(iters);
                cfg.monitor.timing_log_level = std::max(0, v.level);
                auto be = gpt::make_backend("cpu", 0);
                gpt::train::Trainer tr(cfg, groups, *be);
                if (v.level < 0) tr.chunks().set_timers(nullptr);
                gpt::bench::RandomTokens src(cfg.model.vocab_size, cfg.model.seq_length,
                                             cfg.training.micro_batch_size);
                tr.train_step(src);  // warm-up: first-touch of the activations
                gpt::Stopwatch sw;
                tr.train(src, nullptr, nullptr);
                v.ms.push_back(sw.seconds() * 1000.0 / (iters - 1));
            }
    }
    const double base = median(variants.front().ms);
    std::printf("timer overhead: 2 layers, hidden 128, seq 128, 2 micro-batches of 4, fp32, CPU, "
                "log interval 1; %d runs x %d iterations\n", runs, iters - 1);
    std::printf("%-20s %14s %10s %10s %12s\n", "variant", "median ms/it", "min", "max", "overhead");
    for (const auto& v : variants) {
        const double m = median(v.ms);
        std::printf("%-20s %14.2f %10.2f %10.2f %11.2f%%\n", v.name, m,
                    *std::min_element(v.ms.begin(), v.ms.end()), *std::max_element(v.ms.begin(), v.ms.end()),
                    100.0 * (m / base - 1.0));
    }
    MPI_Finalize();
    return 0;
}
