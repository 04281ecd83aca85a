// Consecutive skipped iterations (fp16 gradients not finite at the loss scale). Megatron
// skips and halves the dynamic scale; but with a constant --loss-scale, or once the scale
// sits at --min-loss-scale, nothing changes from one iteration to the next, and a run whose
// every iteration is skipped would end "training done" with the model untouched.
//
// Warns after 10 skipped iterations in a row (and again at 20, 40, 80, ...). Fails with a
// NumericError when limit() iterations in a row made no update, where
//   limit = 100 + hysteresis x ceil(log2(initial-loss-scale / min-loss-scale))
// i.e. 100 iterations beyond the skips the dynamic scaler needs to fall from its initial
// scale to its minimum (164 with Megatron's defaults; 100 for a constant --loss-scale).
#pragma once

#include <cstdint>
#include <string>

#include "config/config.hpp"

namespace gpt::train {

class SkipWatch {
public:
    explicit SkipWatch(const TrainingConfig& t);
    // Records one iteration; returns a warning to log ("" for none); throws NumericError
    // at limit() skips in a row. Every rank sees the same decisions, so all throw alike.
    std::string record(bool skipped, std::int64_t iteration, double loss_scale);
    std::int64_t limit() const { return limit_; }

private:
    std::int64_t limit_;
    std::int64_t in_a_row_ = 0;
    std::int64_t next_warning_ = 10;
};

}  // namespace gpt::train
