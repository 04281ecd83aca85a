// Megatron's OptimizerParamScheduler for the learning rate: linear warm-up from 0, then
// constant, linear or cosine decay to min-lr, counted in samples (iterations x global batch
// when the run is given in iterations), stepped only by successful optimizer steps.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.hpp"

namespace gpt::optim {

// The decay style is the option's enum, gpt::LrDecayStyle (config/enums.hpp).

class LrScheduler {
public:
    // All step counts are in samples.
    LrScheduler(double max_lr, double min_lr, std::int64_t warmup_steps, std::int64_t decay_steps,
                LrDecayStyle style);
    // From the flags: --lr, --min-lr, --lr-decay-style, --lr-decay-iters/--lr-decay-samples,
    // --lr-warmup-iters/--lr-warmup-samples/--lr-warmup-fraction, --train-iters/--train-samples.
    static LrScheduler from_config(const OptimizerConfig& opt, std::int64_t train_iters,
                                   std::int64_t train_samples, std::int64_t global_batch_size);

    double lr() const { return lr_at(num_steps_); }
    double lr_at(std::int64_t num_steps) const;
    void step(std::int64_t increment) { num_steps_ += increment; }
    std::int64_t num_steps() const { return num_steps_; }
    void set_num_steps(std::int64_t n) { num_steps_ = n; }  // resuming
    std::int64_t warmup_steps() const { return warmup_; }
    std::int64_t decay_steps() const { return decay_; }

private:
    double max_lr_, min_lr_;
    std::int64_t warmup_, decay_;
    LrDecayStyle style_;
    std::int64_t num_steps_ = 0;
};

}  // namespace gpt::optim
