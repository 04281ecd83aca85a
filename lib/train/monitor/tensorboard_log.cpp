#include "train/monitor/tensorboard_log.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>

namespace gpt::train {

std::unique_ptr<TensorboardLog> TensorboardLog::open(const LoggingConfig& cfg, int rank, int world_size) {
    if (cfg.tensorboard_dir.empty() || rank != world_size - 1) return nullptr;
    return std::make_unique<TensorboardLog>(cfg);
}

TensorboardLog::TensorboardLog(const LoggingConfig& cfg) : cfg_(cfg), writer_(cfg.tensorboard_dir) {}

void TensorboardLog::both(const std::string& tag, double value, std::int64_t iteration,
                          std::int64_t samples) {
    writer_.add_scalar(tag, value, iteration);
    writer_.add_scalar(tag + " vs samples", value, samples);
}

void TensorboardLog::iteration(const TensorboardIteration& it, const Backend& backend) {
    if (it.iteration % std::max(1, cfg_.tensorboard_log_interval) != 0) return;
    const std::int64_t i = it.iteration, s = it.consumed_samples;
    if (!cfg_.no_log_learning_rate_to_tensorboard) both("learning-rate", it.learning_rate, i, s);
    both("batch-size", static_cast<double>(it.batch_size), i, s);
    if (!it.skipped) both("lm loss", it.lm_loss, i, s);
    if (!cfg_.no_log_loss_scale_to_tensorboard) both("loss-scale", it.loss_scale, i, s);
    if (cfg_.log_world_size_to_tensorboard) both("world-size", it.world_size, i, s);
    if (!it.skipped && std::isfinite(it.grad_norm)) both("grad-norm", it.grad_norm, i, s);
    if (it.num_zeros >= 0) both("num-zeros", static_cast<double>(it.num_zeros), i, s);
    if (!std::isnan(it.params_norm)) both("params-norm", it.params_norm, i, s);
    if (cfg_.log_memory_to_tensorboard) {
        // Megatron's are CUDA caching-allocator statistics. Ours: the bytes the backend has
        // allocated now and at most (any device), and on host-memory backends the process's
        // resident memory, which holds everything else too (MPI buffers, code, datasets).
        writer_.add_scalar("mem-allocated-bytes", static_cast<double>(backend.bytes_in_use()), i);
        writer_.add_scalar("mem-max-allocated-bytes", static_cast<double>(backend.peak_bytes()), i);
        if (backend.host_memory())
            writer_.add_scalar("mem-resident-bytes", static_cast<double>(resident_bytes()), i);
    }
    writer_.flush();
}

void TensorboardLog::iteration_time(std::int64_t iteration, double seconds_per_iteration, double tflops_per_gpu) {
    if (!cfg_.log_timers_to_tensorboard) return;
    writer_.add_scalar("iteration-time", seconds_per_iteration, iteration);
    if (cfg_.log_throughput) writer_.add_scalar("throughput", tflops_per_gpu, iteration);
    writer_.flush();
}

void TensorboardLog::evaluation(const std::string& split, const std::string& name,
                                std::int64_t iteration, std::int64_t consumed_samples, double lm_loss) {
    std::string tag = split == "test" ? "lm loss test" : "lm loss validation";
    if (!name.empty()) tag += " " + name;
    both(tag, lm_loss, iteration, consumed_samples);
    if (cfg_.log_validation_ppl_to_tensorboard)
        both(tag + " ppl", std::exp(std::min(20.0, lm_loss)), iteration, consumed_samples);
    writer_.flush();
}

std::uint64_t resident_bytes() {
    std::ifstream in("/proc/self/statm");
    std::uint64_t size = 0, resident = 0;
    if (!(in >> size >> resident)) return 0;
    return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace gpt::train
