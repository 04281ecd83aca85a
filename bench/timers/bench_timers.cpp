// bench_timers: what Megatron's per-phase timers cost. One CPU process trains a small GPT
// (log interval 1, so every iteration also gathers and formats the timer block) with the
// step's phase hooks removed ("hooks off": the peer), at --timing-log-level 0, 1, 2, and at
// levels 0 and 2 with TensorBoard (--tensorboard-dir, --log-timers-to-tensorboard, event
// files under $TMPDIR, interval 1). The variants alternate within each run, so machine load
// drifts over all of them alike. Prints one row per variant: median, min and max ms per
// iteration over the runs, and the overhead over "hooks off" of the same run: its median and
// min-max over the runs.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
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
    const int runs = arg(argc, argv, "--runs", 7), iters = arg(argc, argv, "--iters", 40);
    gpt::log::Options lo;
    lo.level = "warning";  // the lines are still formatted; only their printing is left out
    gpt::log::init(lo);
    struct Variant {
        const char* name;
        int level;  // -1: hooks off
        bool tensorboard;
        std::vector<double> ms;
    };
    std::vector<Variant> variants{{"hooks off (peer)", -1, false, {}}, {"level 0 (default)", 0, false, {}},
                                  {"level 1", 1, false, {}},           {"level 2", 2, false, {}},
                                  {"level 0 + TensorBoard", 0, true, {}}, {"level 2 + TensorBoard", 2, true, {}}};
    namespace fs = std::filesystem;
    const fs::path tb_root = fs::temp_directory_path() / ("bench_timers_tb." + std::to_string(::getpid()));
    {
        gpt::dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
        for (int r = 0; r < runs; ++r)
            for (auto& v : variants) {
                gpt::Config cfg = bench_config(iters);
                cfg.monitor.timing_log_level = std::max(0, v.level);
                if (v.tensorboard) {
                    // A fresh folder per run: each writer starts its own event file.
                    cfg.logging.tensorboard_dir = (tb_root / (std::to_string(r) + "_" + std::to_string(v.level))).string();
                    cfg.logging.log_timers_to_tensorboard = true;
                }
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
    std::error_code ec;
    fs::remove_all(tb_root, ec);
    const auto& base = variants.front().ms;
    std::printf("timer overhead: 2 layers, hidden 128, seq 128, 2 micro-batches of 4, fp32, CPU, "
                "log interval 1; %d runs x %d iterations\n", runs, iters - 1);
    std::printf("%-24s %13s %9s %9s %18s %18s\n", "variant", "median ms/it", "min", "max",
                "overhead (median)", "overhead min-max");
    for (const auto& v : variants) {
        // Overhead of each run against the hooks-off run right before it (same load).
        std::vector<double> over;
        for (std::size_t r = 0; r < v.ms.size(); ++r) over.push_back(100.0 * (v.ms[r] / base[r] - 1.0));
        std::printf("%-24s %13.2f %9.2f %9.2f %17.2f%% %8.2f%% .. %.2f%%\n", v.name, median(v.ms),
                    *std::min_element(v.ms.begin(), v.ms.end()), *std::max_element(v.ms.begin(), v.ms.end()),
                    median(over), *std::min_element(over.begin(), over.end()),
                    *std::max_element(over.begin(), over.end()));
    }
    MPI_Finalize();
    return 0;
}
