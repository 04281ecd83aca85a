// Megatron's TensorBoard scalars of a training run (training_log and
// evaluate_and_print_results): which tags, against which step, under which flags. Written on
// the last rank only (Megatron's writer lives on rank world_size - 1); the event file itself
// is log::TensorboardWriter.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "log/tensorboard_writer.hpp"

namespace gpt::train {

struct TensorboardIteration {
    std::int64_t iteration = 0;
    std::int64_t consumed_samples = 0;  // after this iteration: the "vs samples" step
    double lm_loss = 0.0;
    double learning_rate = 0.0;
    double loss_scale = 1.0;
    double grad_norm = 0.0;
    double params_norm = std::nan("");  // --log-params-norm
    std::int64_t num_zeros = -1;        // --log-num-zeros-in-grad, on an applied step
    bool skipped = false;               // no loss and no grad norm (Megatron logs neither)
    std::int64_t batch_size = 0;
    int world_size = 1;
};

class TensorboardLog {
public:
    // Opens the event file; nullptr when --tensorboard-dir is not given or this rank is not
    // the last one.
    static std::unique_ptr<TensorboardLog> open(const LoggingConfig& cfg, int rank, int world_size);
    explicit TensorboardLog(const LoggingConfig& cfg);

    // Every iteration; writes on multiples of --tensorboard-log-interval, then flushes.
    void iteration(const TensorboardIteration& it, const Backend& backend);
    // At each --log-interval with --log-timers-to-tensorboard: iteration-time (seconds per
    // iteration over the interval) and, with --log-throughput, throughput (model TFLOP/s
    // per GPU over the interval), as Megatron's training_log.
    void iteration_time(std::int64_t iteration, double seconds_per_iteration, double tflops_per_gpu);
    // One evaluation: `name` "" for the single validation set (tag "lm loss validation"),
    // a set's name with --multiple-validation-sets ("lm loss validation <name>"), or "test"
    // for the test set ("lm loss test"). Flushes.
    void evaluation(const std::string& split, const std::string& name, std::int64_t iteration,
                    std::int64_t consumed_samples, double lm_loss);

    // The writer, for scalars other parts of the loop add (timers).
    log::TensorboardWriter& writer() { return writer_; }

private:
    void both(const std::string& tag, double value, std::int64_t iteration, std::int64_t samples);

    LoggingConfig cfg_;
    log::TensorboardWriter writer_;
};

// The process's resident set size in bytes (VmRSS from /proc/self/statm); 0 when unknown.
std::uint64_t resident_bytes();

}  // namespace gpt::train
