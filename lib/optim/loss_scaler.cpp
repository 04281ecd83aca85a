#include "optim/loss_scaler.hpp"

#include <algorithm>

#include "core/errors.hpp"

namespace gpt::optim {

LossScaler LossScaler::constant(double scale) {
    GPT_REQUIRE(scale > 0.0, UsageError, "--loss-scale must be positive (got ", scale, ")");
    LossScaler s;
    s.scale_ = scale;
    return s;
}

LossScaler LossScaler::dynamic(double initial_scale, double min_scale, int window,
                               int hysteresis) {
    GPT_REQUIRE(initial_scale > 0.0, UsageError, "--initial-loss-scale must be positive");
    GPT_REQUIRE(min_scale > 0.0 && min_scale <= initial_scale, UsageError,
                "--min-loss-scale must be in (0, --initial-loss-scale]");
    GPT_REQUIRE(window > 0, UsageError, "--loss-scale-window must be positive");
    GPT_REQUIRE(hysteresis > 0, UsageError, "--hysteresis must be positive");
    LossScaler s;
    s.dynamic_ = true;
    s.scale_ = initial_scale;
    s.min_scale_ = min_scale;
    s.window_ = window;
    s.hysteresis_ = hysteresis;
    s.hysteresis_tracker_ = hysteresis;
    return s;
}

void LossScaler::update(bool found_inf) {
    if (!dynamic_) return;
    if (found_inf) {
        growth_tracker_ = 0;
        hysteresis_tracker_ -= 1;
        if (hysteresis_tracker_ <= 0) scale_ = std::max(scale_ * 0.5, min_scale_);
        return;
    }
    growth_tracker_ += 1;
    if (growth_tracker_ == window_) {
        growth_tracker_ = 0;
        hysteresis_tracker_ = hysteresis_;
        scale_ *= 2.0;
    }
}

void LossScaler::restore(double scale, int growth_tracker, int hysteresis_tracker) {
    scale_ = scale;
    growth_tracker_ = growth_tracker;
    hysteresis_tracker_ = hysteresis_tracker;
}

}  // namespace gpt::optim
