#include "optim/lr_scheduler.hpp"

#include <cmath>

#include "core/errors.hpp"

namespace gpt::optim {

LrScheduler::LrScheduler(double max_lr, double min_lr, std::int64_t warmup_steps,
                         std::int64_t decay_steps, LrDecayStyle style)
    : max_lr_(max_lr), min_lr_(min_lr), warmup_(warmup_steps), decay_(decay_steps), style_(style) {
    GPT_REQUIRE(max_lr >= 0.0 && min_lr >= 0.0 && min_lr <= max_lr, UsageError,
                "need 0 <= --min-lr (", min_lr, ") <= --lr (", max_lr, ")");
    GPT_REQUIRE(decay_ > 0, UsageError, "the LR decay length must be positive (got ", decay_,
                " samples): set --train-iters/--train-samples or --lr-decay-iters/samples");
    GPT_REQUIRE(warmup_ >= 0 && warmup_ < decay_, UsageError, "LR warm-up (", warmup_,
                " samples) must be shorter than the decay (", decay_, " samples)");
}

LrScheduler LrScheduler::from_config(const OptimizerConfig& o, std::int64_t train_iters,
                                     std::int64_t train_samples, std::int64_t gbs) {
    const LrDecayStyle style = o.lr_decay_style;
    std::int64_t decay = 0, warmup = 0;
    if (train_iters > 0) {
        GPT_REQUIRE(o.lr_decay_samples == 0 && o.lr_warmup_samples == 0, UsageError,
                    "--train-iters goes with --lr-decay-iters/--lr-warmup-iters, not the "
                    "*-samples variants");
        decay = (o.lr_decay_iters > 0 ? o.lr_decay_iters : train_iters) * gbs;
        warmup = o.lr_warmup_fraction > 0.0
                     ? static_cast<std::int64_t>(o.lr_warmup_fraction * static_cast<double>(decay))
                     : o.lr_warmup_iters * gbs;
    } else {
        GPT_REQUIRE(train_samples > 0, UsageError, "set --train-iters or --train-samples");
        GPT_REQUIRE(o.lr_decay_iters == 0 && o.lr_warmup_iters == 0, UsageError,
                    "--train-samples goes with --lr-decay-samples/--lr-warmup-samples, not the "
                    "*-iters variants");
        decay = o.lr_decay_samples > 0 ? o.lr_decay_samples : train_samples;
        warmup = o.lr_warmup_fraction > 0.0
                     ? static_cast<std::int64_t>(o.lr_warmup_fraction * static_cast<double>(decay))
                     : o.lr_warmup_samples;
    }
    GPT_REQUIRE(o.lr_warmup_fraction == 0.0 || (o.lr_warmup_iters == 0 && o.lr_warmup_samples == 0),
                UsageError, "--lr-warmup-fraction and --lr-warmup-iters/samples are exclusive");
    return LrScheduler(o.lr, o.min_lr, warmup, decay, style);
}

double LrScheduler::lr_at(std::int64_t n) const {
    // Megatron: warm-up from 0, then decay; past the decay length stay at min-lr.
    if (warmup_ > 0 && n <= warmup_)
        return max_lr_ * static_cast<double>(n) / static_cast<double>(warmup_);
    if (style_ == LrDecayStyle::Constant) return max_lr_;
    if (n > decay_) return min_lr_;
    const double ratio = static_cast<double>(n - warmup_) / static_cast<double>(decay_ - warmup_);
    const double coeff = style_ == LrDecayStyle::Linear
                             ? 1.0 - ratio
                             : 0.5 * (std::cos(3.141592653589793 * ratio) + 1.0);
    return min_lr_ + coeff * (max_lr_ - min_lr_);
}

}  // namespace gpt::optim
