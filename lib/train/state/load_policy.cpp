#include "train/state/load_policy.hpp"

#include <sstream>

#include "config/saved_run_check.hpp"
#include "core/errors.hpp"
#include "log/log.hpp"

namespace gpt::train {

namespace {

// The vocabulary is padded to a multiple of --make-vocab-size-divisible-by x TP, so a
// checkpoint from another TP size may have more or fewer embedding rows. The padding rows
// take part in the softmax, so cutting or adding them would change the model: refuse,
// saying how to make the two agree (Megatron needs its converter here).
void check_padded_vocab(const std::string& file, std::int64_t saved, std::int64_t now) {
    GPT_REQUIRE(saved == now, UsageError, "checkpoint ", file, " has a padded vocabulary of ",
                saved, " rows but this run pads it to ", now, " (--make-vocab-size-divisible-by x "
                "--tensor-model-parallel-size). HINT: pick --make-vocab-size-divisible-by so that "
                "both layouts pad to ", saved, ", e.g. double it when halving TP (gpt_pretrain adopts "
                "the padded vocabulary of the checkpoint --load names first when the TP size divides it)");
}

// The checkpoint's learning-rate schedule, rebuilt from its saved run as the saving run
// built it (Megatron stores the scheduler's fields; we store the flags they come from).
// nullopt: the run lacks one of them (an older build's table) or from_config refuses them.
std::optional<optim::LrScheduler> saved_scheduler(const SavedRun& saved) {
    for (const char* k : {"lr", "min_lr", "lr_decay_style", "lr_decay_iters", "lr_decay_samples", "lr_warmup_iters",
                          "lr_warmup_samples", "lr_warmup_fraction", "train_iters", "train_samples", "global_batch_size"})
        if (!saved.has(k)) return std::nullopt;
    const Config& c = saved.config;
    try {
        return optim::LrScheduler::from_config(c.optimizer, c.training.train_iters, c.training.train_samples,
                                               c.training.global_batch_size);
    } catch (const UsageError&) {  // flags from_config refuses: not a schedule we can rebuild
        return std::nullopt;
    }
}

// Megatron's OptimizerParamScheduler.load_state_dict compares the schedule's fields with the
// checkpoint's. Differences, as one text ("" when none).
std::string schedule_differences(const optim::LrScheduler& saved, const optim::LrScheduler& run) {
    std::ostringstream os;
    auto cmp = [&](const char* what, auto a, auto b) {
        if (a != b) os << (os.tellp() > 0 ? "; " : "") << what << ": " << a << " in the checkpoint, " << b << " in this run";
    };
    cmp("warm-up's first learning rate", saved.lr_at(0), run.lr_at(0));
    cmp("max learning rate", saved.lr_at(saved.warmup_steps()), run.lr_at(run.warmup_steps()));
    cmp("warm-up samples", saved.warmup_steps(), run.warmup_steps());
    cmp("decay samples", saved.decay_steps(), run.decay_steps());
    cmp("final learning rate", saved.lr_at(saved.decay_steps()), run.lr_at(run.decay_steps()));
    // The decay style shows halfway (linear and cosine agree at both ends).
    cmp("learning rate halfway through the decay", saved.lr_at((saved.warmup_steps() + saved.decay_steps()) / 2),
        run.lr_at((run.warmup_steps() + run.decay_steps()) / 2));
    const optim::ScheduleSpec &a = saved.spec(), &b = run.spec();
    // --decoupled-lr's group (equal to the above where neither run has one).
    if (a.decoupled() || b.decoupled()) {
        cmp("embeddings' and output layer's max learning rate", saved.decoupled_lr_at(saved.warmup_steps()),
            run.decoupled_lr_at(run.warmup_steps()));
        cmp("embeddings' and output layer's final learning rate", saved.decoupled_lr_at(saved.decay_steps()),
            run.decoupled_lr_at(run.decay_steps()));
    }
    if (a.style == LrDecayStyle::Wsd || b.style == LrDecayStyle::Wsd) {
        cmp("WSD annealing samples", a.wsd_decay, b.wsd_decay);
        cmp("WSD annealing style", a.wsd_style, b.wsd_style);
    }
    // Megatron's start_wd, end_wd and wd_incr_style; the style shows halfway.
    cmp("first weight decay", saved.weight_decay_at(0), run.weight_decay_at(0));
    cmp("final weight decay", saved.weight_decay_at(saved.weight_decay_steps()),
        run.weight_decay_at(run.weight_decay_steps()));
    if (a.wd_style != WeightDecayIncrStyle::Constant || b.wd_style != WeightDecayIncrStyle::Constant) {
        cmp("weight-decay schedule samples", a.wd_incr, b.wd_incr);
        cmp("weight decay halfway through the run", saved.weight_decay_at(a.wd_incr / 2),
            run.weight_decay_at(b.wd_incr / 2));
    }
    return os.str();
}

}  // namespace

void LoadPolicy::refuse_mismatch(const HeldCheckpoint& held, std::int64_t padded_vocab_rows) const {
    if (held.vocab_rows) check_padded_vocab(held.file, *held.vocab_rows, padded_vocab_rows);
    if (!held.saved_run) return;
    check_checkpoint_args(*held.saved_run, run_);
    const CheckpointConfig& ck = run_.checkpoint;
    if (load_optim() && ck.use_checkpoint_opt_param_scheduler && !ck.override_opt_param_scheduler)
        GPT_REQUIRE(saved_scheduler(*held.saved_run), UsageError, "checkpoint ", held.file,
                    " does not record a learning-rate schedule this build can rebuild: "
                    "--use-checkpoint-opt_param-scheduler cannot be honoured; give the schedule's flags");
}

SavedProgress LoadPolicy::progress(const HeldCheckpoint& held, int dp_size, int dp_rank) const {
    SavedProgress p = held.progress;
    if (run_.checkpoint.finetune) {
        // A new run on the loaded parameters: iteration, data position and counters at 0.
        p.iteration = p.consumed_train = p.consumed_valid = p.skipped = 0;
        p.flops = 0.0;
    }
    if (!load_optim()) {
        p.optimizer_steps = p.scheduler_steps = 0;
        p.dynamic_scaler = false;
    }
    if (!load_rng()) {
        p.have_rng = false;
        p.dropout_micro_batches = 0;
    }
    // This rank's own saved RNG position when the layout is the same; else the global one.
    if (!p.own_rng(dp_size, dp_rank) && p.dropout_micro_batches % dp_size != 0)
        GPT_LOG(warning) << "checkpoint " << held.file << " stopped after " << p.dropout_micro_batches
                         << " micro-batches, not a multiple of the data-parallel size " << dp_size
                         << " (saved with another micro-batch size or data-parallel size): dropout masks will not continue the saved run's";
    if (p.seed != static_cast<std::int64_t>(run_.training.seed))
        GPT_LOG(warning) << "checkpoint " << held.file << " was trained with --seed " << p.seed
                         << "; this run uses " << run_.training.seed
                         << ": dropout masks and data order follow the new seed";
    return p;
}

std::optional<optim::LrScheduler> LoadPolicy::schedule(const HeldCheckpoint& held,
                                                        const optim::LrScheduler& run) const {
    // --override-opt_param-scheduler: the flags' schedule, silently. Without either flag
    // Megatron refuses a difference; this project has always let the flags win, so it warns
    // instead (docs/checkpoint-format.md).
    const CheckpointConfig& ck = run_.checkpoint;
    if (!load_optim() || !held.saved_run || ck.override_opt_param_scheduler) return std::nullopt;
    const std::optional<optim::LrScheduler> saved = saved_scheduler(*held.saved_run);
    const std::string diff = saved ? schedule_differences(*saved, run) : std::string();
    if (ck.use_checkpoint_opt_param_scheduler) {  // refuse_mismatch made sure there is one
        if (!diff.empty()) GPT_LOG(info) << "using the checkpoint's learning-rate schedule: " << diff;
        return saved;
    }
    if (!diff.empty())
        GPT_LOG(warning) << "the learning-rate schedule differs from the checkpoint's (" << diff
                         << "): following this run's flags. HINT: --override-opt_param-scheduler "
                            "says so, --use-checkpoint-opt_param-scheduler takes the checkpoint's";
    return std::nullopt;
}

std::string LoadPolicy::left_out() const {
    const CheckpointConfig& ck = run_.checkpoint;
    std::string s = ck.finetune        ? " (--finetune: parameters only, starting at iteration 0)"
                    : !load_optim()    ? " (--no-load-optim: optimizer, scheduler and loss scale start afresh)"
                                       : "";
    if (!load_rng() && !ck.finetune) s += " (--no-load-rng: dropout RNG starts afresh)";
    return s;
}

}  // namespace gpt::train
