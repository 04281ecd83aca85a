// Loss scaling for fp16 with Megatron's semantics (DynamicGradScaler / ConstantGradScaler).
//
// Dynamic: start at --initial-loss-scale (2^32). Each overflow resets the clean-step count
// and uses up one unit of hysteresis; once hysteresis is used up every further overflow
// halves the scale (never below --min-loss-scale). After --loss-scale-window consecutive
// clean steps the scale doubles and hysteresis is restored.
#pragma once

#include <cstdint>

namespace gpt::optim {

class LossScaler {
public:
    // A constant scale (--loss-scale N, or 1 for fp32/bf16).
    static LossScaler constant(double scale);
    static LossScaler dynamic(double initial_scale, double min_scale, int window, int hysteresis);

    double scale() const { return scale_; }
    bool is_dynamic() const { return dynamic_; }
    // Called after every step with whether the gradients had an inf/nan.
    void update(bool found_inf);

    // For checkpoints.
    int growth_tracker() const { return growth_tracker_; }
    int hysteresis_tracker() const { return hysteresis_tracker_; }
    void restore(double scale, int growth_tracker, int hysteresis_tracker);

private:
    LossScaler() = default;
    bool dynamic_ = false;
    double scale_ = 1.0;
    double min_scale_ = 1.0;
    int window_ = 1000;
    int hysteresis_ = 2;
    int growth_tracker_ = 0;
    int hysteresis_tracker_ = 2;
};

}  // namespace gpt::optim
