#include "optim/lr_scheduler.hpp"

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"

namespace gpt::optim {

namespace {
constexpr double kPi = 3.141592653589793;
}

LrScheduler::LrScheduler(const ScheduleSpec& s) : s_(s) {
    GPT_REQUIRE(s.max_lr >= 0.0 && s.min_lr >= 0.0 && s.min_lr <= s.max_lr, UsageError,
                "need 0 <= --min-lr (", s.min_lr, ") <= --lr (", s.max_lr, ")");
    GPT_REQUIRE(s.init_lr >= 0.0 && s.init_lr <= s.max_lr, UsageError, "need 0 <= --lr-warmup-init (",
                s.init_lr, ") <= --lr (", s.max_lr, ")");
    GPT_REQUIRE(s.decay > 0, UsageError, "the LR decay length must be positive (got ", s.decay,
                " samples): set --train-iters/--train-samples or --lr-decay-iters/samples");
    GPT_REQUIRE(s.warmup >= 0 && s.warmup < s.decay, UsageError, "LR warm-up (", s.warmup,
                " samples) must be shorter than the decay (", s.decay, " samples)");
    if (s.style == LrDecayStyle::Wsd)
        GPT_REQUIRE(s.wsd_decay > 0 && s.wsd_decay <= s.decay - s.warmup, UsageError,
                    "--lr-decay-style WSD: the annealing phase (--lr-wsd-decay-iters/samples: ", s.wsd_decay,
                    " samples) must be positive and fit in the decay after the warm-up (", s.decay - s.warmup,
                    " samples)");
    GPT_REQUIRE(s.start_wd >= 0.0 && s.end_wd >= s.start_wd, UsageError, "need 0 <= --start-weight-decay (",
                s.start_wd, ") <= --end-weight-decay (", s.end_wd, ")");
    GPT_REQUIRE(s.wd_style != WeightDecayIncrStyle::Constant || s.start_wd == s.end_wd, UsageError,
                "--weight-decay-incr-style constant keeps one weight decay; got --start-weight-decay ",
                s.start_wd, " and --end-weight-decay ", s.end_wd);
    GPT_REQUIRE(s.wd_incr > 0, UsageError, "the weight-decay schedule's length must be positive (got ",
                s.wd_incr, " samples)");
    if (s.decoupled())
        GPT_REQUIRE(s.decoupled_min_lr >= 0.0 && s.decoupled_min_lr <= s.decoupled_max_lr &&
                        s.init_lr <= s.decoupled_max_lr,
                    UsageError, "need 0 <= the decoupled floor (", s.decoupled_min_lr, ") <= --decoupled-lr (",
                    s.decoupled_max_lr, ") and --lr-warmup-init (", s.init_lr, ") <= --decoupled-lr");
}

LrScheduler::LrScheduler(double max_lr, double min_lr, std::int64_t warmup_steps, std::int64_t decay_steps,
                         LrDecayStyle style)
    : LrScheduler(ScheduleSpec{.max_lr = max_lr, .min_lr = min_lr, .warmup = warmup_steps,
                               .decay = decay_steps, .style = style}) {}

LrScheduler LrScheduler::from_config(const OptimizerConfig& o, std::int64_t train_iters,
                                     std::int64_t train_samples, std::int64_t gbs) {
    ScheduleSpec s;
    s.max_lr = o.lr;
    s.min_lr = o.min_lr;
    if (o.decoupled_lr != OptimizerConfig::kLrNotGiven) {
        s.decoupled_max_lr = o.decoupled_lr;
        s.decoupled_min_lr = o.decoupled_min_lr != OptimizerConfig::kLrNotGiven ? o.decoupled_min_lr : o.min_lr;
    }
    s.init_lr = o.lr_warmup_init;
    s.style = o.lr_decay_style;
    s.wsd_style = o.lr_wsd_decay_style;
    if (train_iters > 0) {
        GPT_REQUIRE(o.lr_decay_samples == 0 && o.lr_warmup_samples == 0 && o.lr_wsd_decay_samples == 0,
                    UsageError,
                    "--train-iters goes with --lr-decay-iters/--lr-warmup-iters/--lr-wsd-decay-iters, not the "
                    "*-samples variants");
        s.decay = (o.lr_decay_iters > 0 ? o.lr_decay_iters : train_iters) * gbs;
        s.warmup = o.lr_warmup_fraction > 0.0
                       ? static_cast<std::int64_t>(o.lr_warmup_fraction * static_cast<double>(s.decay))
                       : o.lr_warmup_iters * gbs;
        s.wsd_decay = o.lr_wsd_decay_iters * gbs;
        s.wd_incr = train_iters * gbs;
    } else {
        GPT_REQUIRE(train_samples > 0, UsageError, "set --train-iters or --train-samples");
        GPT_REQUIRE(o.lr_decay_iters == 0 && o.lr_warmup_iters == 0 && o.lr_wsd_decay_iters == 0, UsageError,
                    "--train-samples goes with --lr-decay-samples/--lr-warmup-samples/--lr-wsd-decay-samples, "
                    "not the *-iters variants");
        s.decay = o.lr_decay_samples > 0 ? o.lr_decay_samples : train_samples;
        s.warmup = o.lr_warmup_fraction > 0.0
                       ? static_cast<std::int64_t>(o.lr_warmup_fraction * static_cast<double>(s.decay))
                       : o.lr_warmup_samples;
        s.wsd_decay = o.lr_wsd_decay_samples;
        s.wd_incr = train_samples;
    }
    GPT_REQUIRE(o.lr_warmup_fraction == 0.0 || (o.lr_warmup_iters == 0 && o.lr_warmup_samples == 0),
                UsageError, "--lr-warmup-fraction and --lr-warmup-iters/samples are exclusive");
    s.wd_style = o.weight_decay_incr_style;
    const bool start_given = o.start_weight_decay != OptimizerConfig::kWeightDecayNotGiven;
    const bool end_given = o.end_weight_decay != OptimizerConfig::kWeightDecayNotGiven;
    if (s.wd_style == WeightDecayIncrStyle::Constant) {
        s.start_wd = start_given ? o.start_weight_decay : o.weight_decay;
        s.end_wd = end_given ? o.end_weight_decay : o.weight_decay;
    } else {
        GPT_REQUIRE(start_given && end_given, UsageError, "--weight-decay-incr-style ", s.wd_style,
                    " needs --start-weight-decay and --end-weight-decay");
        s.start_wd = o.start_weight_decay;
        s.end_wd = o.end_weight_decay;
    }
    return LrScheduler(s);
}

double LrScheduler::lr_between(std::int64_t n, double max_lr, double min_lr) const {
    // Megatron's get_lr, branch for branch: warm-up from init_lr, then decay; past the decay
    // length stay at min-lr.
    if (s_.warmup > 0 && n <= s_.warmup)
        return s_.init_lr + (max_lr - s_.init_lr) * static_cast<double>(n) / static_cast<double>(s_.warmup);
    if (s_.style == LrDecayStyle::Constant) return max_lr;
    if (n > s_.decay) return min_lr;
    if (s_.style == LrDecayStyle::InverseSquareRoot) {
        const double w = static_cast<double>(std::max<std::int64_t>(s_.warmup, 1));
        const double k = static_cast<double>(std::max<std::int64_t>(n, 1));
        return std::max(min_lr, max_lr * std::sqrt(w) / std::sqrt(k));
    }
    const double ratio = static_cast<double>(n - s_.warmup) / static_cast<double>(s_.decay - s_.warmup);
    double coeff = 0.0;
    switch (s_.style) {
        case LrDecayStyle::Linear: coeff = 1.0 - ratio; break;
        case LrDecayStyle::Cosine: coeff = 0.5 * (std::cos(kPi * ratio) + 1.0); break;
        case LrDecayStyle::Wsd: {
            // Stable at max-lr, then anneal over the last wsd_decay samples of the decay.
            const std::int64_t anneal_start = s_.decay - s_.wsd_decay;
            if (n <= anneal_start) {
                coeff = 1.0;
                break;
            }
            const double r = static_cast<double>(n - anneal_start) / static_cast<double>(s_.wsd_decay);
            switch (s_.wsd_style) {
                case WsdDecayStyle::Linear: coeff = 1.0 - r; break;
                case WsdDecayStyle::Cosine: coeff = 0.5 * (std::cos(kPi * r) + 1.0); break;
                case WsdDecayStyle::Exponential: coeff = 2.0 * std::pow(0.5, r) - 1.0; break;
                case WsdDecayStyle::MinusSqrt: coeff = 1.0 - std::sqrt(r); break;
            }
            break;
        }
        case LrDecayStyle::Constant:
        case LrDecayStyle::InverseSquareRoot: break;  // returned above
    }
    return min_lr + coeff * (max_lr - min_lr);
}

double LrScheduler::weight_decay_at(std::int64_t n) const {
    // Megatron's get_wd: start_wd rising to end_wd over the run, end_wd after it.
    if (n > s_.wd_incr || s_.wd_style == WeightDecayIncrStyle::Constant) return s_.end_wd;
    const double r = static_cast<double>(n) / static_cast<double>(s_.wd_incr);
    const double coeff = s_.wd_style == WeightDecayIncrStyle::Linear ? r : 0.5 * (std::cos(kPi * (1.0 - r)) + 1.0);
    return s_.start_wd + coeff * (s_.end_wd - s_.start_wd);
}

}  // namespace gpt::optim
