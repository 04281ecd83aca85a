#include "train/monitor/skip_watch.hpp"

#include <cmath>

#include "core/errors.hpp"

namespace gpt::train {

namespace {
constexpr std::int64_t kFirstWarning = 10;
constexpr std::int64_t kBeyondScalerRange = 100;

std::int64_t skip_limit(const TrainingConfig& t) {
    if (t.loss_scale > 0) return kBeyondScalerRange;  // constant scale: nothing will change
    const double halvings = std::ceil(std::log2(std::max(1.0, t.initial_loss_scale / t.min_loss_scale)));
    return kBeyondScalerRange + static_cast<std::int64_t>(halvings) * std::max(1, t.hysteresis);
}
}  // namespace

SkipWatch::SkipWatch(const TrainingConfig& t) : limit_(skip_limit(t)), next_warning_(kFirstWarning) {}

std::string SkipWatch::record(bool skipped, std::int64_t iteration, double loss_scale) {
    if (!skipped) {
        in_a_row_ = 0;
        next_warning_ = kFirstWarning;
        return "";
    }
    ++in_a_row_;
    GPT_REQUIRE(in_a_row_ < limit_, NumericError, "no update for ", in_a_row_,
                " iterations in a row (every one skipped: gradients not finite at loss scale ",
                loss_scale, ", iteration ", iteration,
                "). HINT: lower --loss-scale or --lr, use dynamic loss scaling or --bf16, or check the data");
    if (in_a_row_ < next_warning_) return "";
    next_warning_ *= 2;
    return detail::concat(in_a_row_, " iterations in a row skipped (gradients not finite at loss scale ",
                          loss_scale, ", iteration ", iteration, "); the run fails at ", limit_);
}

}  // namespace gpt::train
