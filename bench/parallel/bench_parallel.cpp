// bench_parallel: one PTD-P layout of gpt-tiny (or any config) on the ranks of mpiexec,
// random tokens, fp32. Prints one JSON line (rank 0): tokens/s, the bytes one iteration
// moves per process group (from the communicators' counters, summed over ranks), and the
// pipeline bubble measured (each stage's time blocked in receives over its compute time,
// averaged over stages) beside Megatron's formula (p-1)/(v m), which assumes stages of
// equal cost.
//
//   mpiexec -n 2 bench_parallel --config configs/gpt-tiny.ini --pipeline-model-parallel-size 2
//       --micro-batch-size 1 --global-batch-size 8 [--iters 6] [--warmup 2]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/options.hpp"
#include "config/validate.hpp"
#include "core/errors.hpp"
#include "core/timer.hpp"
#include "dist/mpi_environment.hpp"
#include "dist/process_groups.hpp"
#include "train/trainer.hpp"

namespace {

class RandomTokens final : public gpt::train::MicroBatchSource {
public:
    RandomTokens(int vocab, int seq, int mbs, int seed) : n_(static_cast<std::size_t>(mbs) * (seq + 1)) {
        std::mt19937 rng(static_cast<unsigned>(seed));
        std::uniform_int_distribution<int> u(0, vocab - 1);
        tokens_.resize(n_ * 8);
        for (auto& t : tokens_) t = u(rng);
    }
    void next(std::int32_t* out) override {
        std::copy_n(tokens_.begin() + static_cast<std::ptrdiff_t>((i_++ % 8) * n_), n_, out);
    }

private:
    std::size_t n_, i_ = 0;
    std::vector<std::int32_t> tokens_;
};

// Removes "--name value" from args and returns value (or def).
int take_int(std::vector<std::string>& args, const std::string& name, int def) {
    for (std::size_t i = 0; i + 1 < args.size(); ++i)
        if (args[i] == name) {
            const int v = std::stoi(args[i + 1]);
            args.erase(args.begin() + static_cast<std::ptrdiff_t>(i), args.begin() + static_cast<std::ptrdiff_t>(i + 2));
            return v;
        }
    return def;
}

double sum_over_world(double v) {
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return v;
}

int run(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    const int iters = take_int(args, "--iters", 6);
    const int warmup = take_int(args, "--warmup", 2);
    gpt::Config cfg = gpt::parse_args(args).config;
    if (cfg.model.vocab_size == 0) cfg.model.vocab_size = 50257;  // GPT-2's, without the files
    cfg.parallel.device = gpt::DeviceKind::Cpu;
    int world = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    gpt::validate(cfg, world);
    cfg.training.train_iters = iters + warmup;
    gpt::dist::ProcessGroups groups(MPI_COMM_WORLD, cfg.parallel.tensor_model_parallel_size,
                                    cfg.parallel.pipeline_model_parallel_size);
    auto be = gpt::make_backend("cpu", groups.local_rank());
    gpt::train::Trainer tr(cfg, groups, *be);
    RandomTokens src(static_cast<int>(cfg.model.vocab_size), cfg.model.seq_length,
                     cfg.training.micro_batch_size, 17 + groups.coords().dp);
    for (int i = 0; i < warmup; ++i) tr.train_step(src);

    gpt::dist::Communicator* comms[] = {&groups.tp(), &groups.pp(), &groups.dp(),
                                        &groups.embedding(), &groups.model_parallel(), &groups.world()};
    for (auto* c : comms) c->reset_stats();
    double wait = 0.0, compute = 0.0;
    MPI_Barrier(MPI_COMM_WORLD);
    gpt::Stopwatch sw;
    for (int i = 0; i < iters; ++i) {
        tr.train_step(src);
        wait += tr.chunks().last_timing().wait_seconds;
        compute += tr.chunks().last_timing().compute_seconds;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const double seconds = sw.seconds();

    // Bytes per iteration per group, summed over the ranks (each rank counts what it sends
    // into the group's collectives and point-to-point messages).
    std::map<std::string, double> bytes;
    for (auto* c : comms) bytes[c->name()] = sum_over_world(double(c->stats().total_bytes()) / iters);
    const int p = groups.grid().pp_size();
    const int v = tr.chunks().num_chunks();
    const auto m = tr.num_micro_batches();
    // In 1F1B every stage idles (p-1) forward+backward passes per iteration: the same
    // fraction (p-1)/(v m) of its compute on every stage, so average over the ranks.
    const double measured = compute > 0 ? sum_over_world(wait / compute) / world : 0.0;
    const double formula = p > 1 ? double(p - 1) / (double(v) * double(m)) : 0.0;
    const double tokens = double(cfg.training.global_batch_size) * cfg.model.seq_length * iters;
    if (rank == 0) {
        std::ostringstream os;
        os.precision(4);
        os << "{\"ranks\": " << world << ", \"tp\": " << groups.grid().tp_size() << ", \"pp\": " << p
           << ", \"dp\": " << groups.grid().dp_size() << ", \"vp\": " << v << ", \"micro_batches\": " << m
           << ", \"sequence_parallel\": " << (cfg.parallel.sequence_parallel ? "true" : "false")
           << ", \"distributed_optimizer\": " << (cfg.parallel.use_distributed_optimizer ? "true" : "false")
           << ", \"tokens_per_s\": " << tokens / seconds << ", \"ms_per_iteration\": " << seconds * 1e3 / iters;
        for (const auto& [name, b] : bytes) os << ", \"bytes_" << name << "\": " << static_cast<long long>(b);
        os << ", \"bubble_measured\": " << measured << ", \"bubble_formula\": " << formula << "}";
        std::printf("%s\n", os.str().c_str());
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    gpt::dist::MpiEnvironment env(&argc, &argv);
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_parallel: %s\n", e.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return 1;
}
