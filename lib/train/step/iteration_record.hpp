// What one training iteration did: the step's result that the run monitor logs
// (train/monitor/run_monitor.hpp) and the trainer keeps for tests and the benchmark.
#pragma once

#include <cstdint>

namespace gpt::train {

struct IterationRecord {
    std::int64_t iteration = 0;
    double lm_loss = 0.0;       // mean over the global batch
    std::int64_t global_batch = 0;  // samples this iteration (--rampup-batch-size: grows)
    double lr = 0.0;            // the learning rate this step used
    double grad_norm = 0.0;     // NaN when skipped
    double params_norm = 0.0;   // after the step, with --log-params-norm; NaN without it
    std::int64_t num_zeros = -1;  // zero gradient elements, with --log-num-zeros-in-grad; -1: none
    double loss_scale = 1.0;    // the scale this step used
    bool skipped = false;
    bool spiky = false;         // skipped by --check-for-spiky-loss
    double elapsed_ms = 0.0;
};

}  // namespace gpt::train
