// Megatron's OptimizerParamScheduler: the learning rate (linear warm-up from
// --lr-warmup-init, then constant, linear, cosine, inverse-square-root or WSD decay to
// min-lr) and the weight decay (constant, or linear/cosine from --start-weight-decay to
// --end-weight-decay over the run), counted in samples (iterations x global batch when the
// run is given in iterations), stepped only by successful optimizer steps. With
// --decoupled-lr the word embeddings and the output layer follow the same schedule between
// their own peak and floor (Megatron's param group with its own max_lr and min_lr).
#pragma once

#include <cstdint>
#include <string>

#include "config/config.hpp"

namespace gpt::optim {

// Every length in samples.
struct ScheduleSpec {
    double max_lr = 0.0, min_lr = 0.0, init_lr = 0.0;
    std::int64_t warmup = 0, decay = 0;
    LrDecayStyle style = LrDecayStyle::Linear;
    std::int64_t wsd_decay = 0;  // WSD: the annealing phase, the last wsd_decay samples of the decay
    WsdDecayStyle wsd_style = WsdDecayStyle::Exponential;
    double start_wd = 0.0, end_wd = 0.0;
    std::int64_t wd_incr = 1;  // the run's length
    WeightDecayIncrStyle wd_style = WeightDecayIncrStyle::Constant;
    // --decoupled-lr's group: its peak and floor; decoupled_max_lr < 0: no such group.
    double decoupled_max_lr = -1.0, decoupled_min_lr = 0.0;
    bool decoupled() const { return decoupled_max_lr >= 0.0; }
};

class LrScheduler {
public:
    // Refuses (UsageError) what Megatron's constructor asserts, and a WSD annealing phase
    // that does not fit in the decay after the warm-up (its learning rate would jump).
    explicit LrScheduler(const ScheduleSpec& s);
    // Learning rate only, warm-up from 0, weight decay 0.
    LrScheduler(double max_lr, double min_lr, std::int64_t warmup_steps, std::int64_t decay_steps,
                LrDecayStyle style);
    // From the flags: --lr, --min-lr, --lr-decay-style, --lr-decay-iters/--lr-decay-samples,
    // --lr-warmup-iters/--lr-warmup-samples/--lr-warmup-fraction, --lr-warmup-init,
    // --lr-wsd-*, --weight-decay, --start/--end-weight-decay, --weight-decay-incr-style,
    // --train-iters/--train-samples.
    static LrScheduler from_config(const OptimizerConfig& opt, std::int64_t train_iters,
                                   std::int64_t train_samples, std::int64_t global_batch_size);

    double lr() const { return lr_at(num_steps_); }
    double lr_at(std::int64_t num_steps) const { return lr_between(num_steps, s_.max_lr, s_.min_lr); }
    // The word embeddings' and the output layer's: --decoupled-lr's group, else lr().
    double decoupled_lr() const { return decoupled_lr_at(num_steps_); }
    double decoupled_lr_at(std::int64_t num_steps) const {
        return s_.decoupled() ? lr_between(num_steps, s_.decoupled_max_lr, s_.decoupled_min_lr) : lr_at(num_steps);
    }
    double weight_decay() const { return weight_decay_at(num_steps_); }
    double weight_decay_at(std::int64_t num_steps) const;
    void step(std::int64_t increment) { num_steps_ += increment; }
    std::int64_t num_steps() const { return num_steps_; }
    void set_num_steps(std::int64_t n) { num_steps_ = n; }  // resuming
    std::int64_t warmup_steps() const { return s_.warmup; }
    std::int64_t decay_steps() const { return s_.decay; }
    std::int64_t weight_decay_steps() const { return s_.wd_incr; }
    const ScheduleSpec& spec() const { return s_; }

private:
    // Megatron's get_lr for a param group of peak max_lr and floor min_lr.
    double lr_between(std::int64_t num_steps, double max_lr, double min_lr) const;

    ScheduleSpec s_;
    std::int64_t num_steps_ = 0;
};

}  // namespace gpt::optim
