// The optimizer's flags and Megatron's parameter schedule (learning rate and weight decay):
// values in range and the combinations Megatron asserts, before any rank builds anything.
// What needs the run's length (warm-up shorter than the decay, WSD's annealing inside it)
// is optim::LrScheduler's, which training builds from the same flags.
#include <cmath>

#include "config/validate.hpp"
#include "config/value_checks.hpp"
#include "core/errors.hpp"

namespace gpt {

namespace {

// Megatron's validate_args: --start/--end-weight-decay only with an increasing style, and
// then both; the constant style sets both to --weight-decay (the arguments table shows them).
void resolve_weight_decay_schedule(OptimizerConfig& o) {
    const bool start = o.start_weight_decay != OptimizerConfig::kWeightDecayNotGiven;
    const bool end = o.end_weight_decay != OptimizerConfig::kWeightDecayNotGiven;
    if (o.weight_decay_incr_style == WeightDecayIncrStyle::Constant) {
        // Equal to --weight-decay: a resolved configuration validated again.
        GPT_REQUIRE((!start || o.start_weight_decay == o.weight_decay) &&
                        (!end || o.end_weight_decay == o.weight_decay),
                    UsageError,
                    "--start-weight-decay and --end-weight-decay need --weight-decay-incr-style linear or cosine "
                    "(the constant style keeps --weight-decay ", o.weight_decay, ")");
        o.start_weight_decay = o.end_weight_decay = o.weight_decay;
        return;
    }
    GPT_REQUIRE(start && end, UsageError, "--weight-decay-incr-style ", o.weight_decay_incr_style,
                " needs --start-weight-decay and --end-weight-decay");
    require_finite(o.start_weight_decay, "start-weight-decay");
    require_finite(o.end_weight_decay, "end-weight-decay");
    GPT_REQUIRE(o.start_weight_decay >= 0 && o.end_weight_decay >= o.start_weight_decay, UsageError,
                "need 0 <= --start-weight-decay (", o.start_weight_decay, ") <= --end-weight-decay (",
                o.end_weight_decay, ")");
}

// --decoupled-lr / --decoupled-min-lr: a peak and a floor as --lr's (the floor --min-lr when
// not given), and the warm-up's start below the peak. Megatron runs a floor above the peak (a
// "decay" that rises) and ignores --decoupled-min-lr without --decoupled-lr; both are refused.
void validate_decoupled_lr(const OptimizerConfig& o) {
    constexpr double none = OptimizerConfig::kLrNotGiven;
    if (o.decoupled_lr == none) {
        GPT_REQUIRE(o.decoupled_min_lr == none, UsageError,
                    "--decoupled-min-lr needs --decoupled-lr (the embeddings and the output layer follow --lr "
                    "and --min-lr without it)");
        return;
    }
    require_finite(o.decoupled_lr, "decoupled-lr");
    require_finite(o.decoupled_min_lr, "decoupled-min-lr");
    const double floor = o.decoupled_min_lr == none ? o.min_lr : o.decoupled_min_lr;
    const char* floor_flag = o.decoupled_min_lr == none ? "--min-lr" : "--decoupled-min-lr";
    GPT_REQUIRE(o.decoupled_lr >= 0 && floor >= 0, UsageError, "--decoupled-lr and ", floor_flag,
                " must not be negative");
    GPT_REQUIRE(floor <= o.decoupled_lr, UsageError, floor_flag, " ", floor, " exceeds --decoupled-lr ",
                o.decoupled_lr, " (the embeddings' and output layer's learning rate would rise as it decays)");
    GPT_REQUIRE(o.lr_warmup_init <= o.decoupled_lr, UsageError, "--lr-warmup-init ", o.lr_warmup_init,
                " exceeds --decoupled-lr ", o.decoupled_lr, " (the warm-up starts there for every group)");
}

}  // namespace

void validate_schedule(OptimizerConfig& o) {
    require_finite(o.lr, "lr");
    require_finite(o.min_lr, "min-lr");
    require_finite(o.lr_warmup_init, "lr-warmup-init");
    require_finite(o.weight_decay, "weight-decay");
    require_finite(o.clip_grad, "clip-grad");
    require_finite(o.adam_eps, "adam-eps");
    require_non_negative(o.lr_decay_iters, "lr-decay-iters");
    require_non_negative(o.lr_decay_samples, "lr-decay-samples");
    require_non_negative(o.lr_warmup_iters, "lr-warmup-iters");
    require_non_negative(o.lr_warmup_samples, "lr-warmup-samples");
    require_non_negative(o.lr_wsd_decay_iters, "lr-wsd-decay-iters");
    require_non_negative(o.lr_wsd_decay_samples, "lr-wsd-decay-samples");
    GPT_REQUIRE(o.lr >= 0 && o.min_lr >= 0, UsageError, "--lr and --min-lr must not be negative");
    GPT_REQUIRE(o.min_lr <= o.lr || o.lr == 0, UsageError, "--min-lr ", o.min_lr, " exceeds --lr ", o.lr);
    GPT_REQUIRE(o.lr_warmup_init >= 0 && (o.lr_warmup_init <= o.lr || o.lr == 0), UsageError,
                "--lr-warmup-init ", o.lr_warmup_init, " must be in [0, --lr ", o.lr, "]");
    validate_decoupled_lr(o);
    GPT_REQUIRE(!(o.lr_warmup_fraction > 0 && o.lr_warmup_iters > 0), UsageError,
                "give only one of --lr-warmup-fraction and --lr-warmup-iters");
    GPT_REQUIRE(o.lr_warmup_fraction >= 0 && o.lr_warmup_fraction <= 1, UsageError,
                "--lr-warmup-fraction must be in [0, 1], got ", o.lr_warmup_fraction);
    // WSD's annealing length: needed by WSD (Megatron asserts it), meaningless without it.
    const bool wsd_length = o.lr_wsd_decay_iters > 0 || o.lr_wsd_decay_samples > 0;
    if (o.lr_decay_style == LrDecayStyle::Wsd)
        GPT_REQUIRE(wsd_length, UsageError,
                    "--lr-decay-style WSD needs the annealing phase's length: --lr-wsd-decay-iters (with "
                    "--train-iters) or --lr-wsd-decay-samples (with --train-samples)");
    else
        GPT_REQUIRE(!wsd_length, UsageError, "--lr-wsd-decay-iters/--lr-wsd-decay-samples need --lr-decay-style WSD (got ",
                    o.lr_decay_style, ")");
    GPT_REQUIRE(o.weight_decay >= 0 && o.clip_grad >= 0, UsageError,
                "--weight-decay and --clip-grad must not be negative");
    resolve_weight_decay_schedule(o);
    GPT_REQUIRE(o.adam_beta1 >= 0 && o.adam_beta1 < 1 && o.adam_beta2 >= 0 && o.adam_beta2 < 1,
                UsageError, "Adam betas must be in [0, 1)");
    GPT_REQUIRE(o.adam_eps > 0, UsageError, "--adam-eps must be positive");
}

}  // namespace gpt
