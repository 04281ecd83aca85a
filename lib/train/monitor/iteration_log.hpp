// Megatron's console output: the per-interval iteration line and the validation block,
// plus the model FLOPs behind its "throughput per GPU" figure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/config.hpp"

namespace gpt::train {

// Megatron's num_floating_point_operations for one iteration of `batch` sequences
// (forward + backward; 72 B s l h^2 (1 + s/6h + V/12hl) for ffn = 4h).
double model_flops_per_iteration(const ModelConfig& m, std::int64_t padded_vocab,
                                 std::int64_t batch);

struct IntervalStats {
    std::int64_t iteration = 0;
    std::int64_t train_iters = 0;
    std::int64_t consumed_samples = 0;
    double elapsed_ms_per_iteration = 0.0;
    double tflops_per_gpu = 0.0;
    double learning_rate = 0.0;
    std::int64_t global_batch_size = 0;
    std::optional<double> lm_loss;    // average over the interval's applied iterations
    double loss_scale = 1.0;
    std::optional<double> grad_norm;  // of the last iteration, when it was not skipped
    std::optional<std::int64_t> num_zeros;  // of the last iteration, with --log-num-zeros-in-grad
    std::optional<double> params_norm;  // of the last iteration, with --log-params-norm
    std::int64_t skipped_iterations = 0;
    std::int64_t nan_iterations = 0;
};

// " iteration        N/       M | consumed samples: ... | ... | number of nan iterations:   0 |"
std::string format_iteration_line(const IntervalStats& s);

// The dashed three-line block: " validation loss at <prefix> | lm loss value: ... | lm loss PPL: ... | "
std::string format_validation_block(const std::string& prefix, double lm_loss);

}  // namespace gpt::train
