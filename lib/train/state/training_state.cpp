#include "train/state/training_state.hpp"

#include "train/step/dropout_stream.hpp"

namespace gpt::train {

namespace {

optim::LossScaler make_scaler(const TrainingConfig& t) {
    if (t.loss_scale > 0.0) return optim::LossScaler::constant(t.loss_scale);
    if (t.fp16)
        return optim::LossScaler::dynamic(t.initial_loss_scale, t.min_loss_scale,
                                          t.loss_scale_window, t.hysteresis);
    return optim::LossScaler::constant(1.0);
}

}  // namespace

TrainingState::TrainingState(const Config& cfg)
    : seed(cfg.training.seed),
      scheduler(optim::LrScheduler::from_config(cfg.optimizer, cfg.training.train_iters,
                                                cfg.training.train_samples,
                                                cfg.training.global_batch_size)),
      scaler(make_scaler(cfg.training)) {}

SavedProgress TrainingState::save(std::int64_t optimizer_steps, int dp_size, int dp_rank) const {
    SavedProgress p;
    p.iteration = iteration;
    p.consumed_train = consumed_train;
    p.consumed_valid = consumed_valid;
    p.skipped = skipped;
    p.optimizer_steps = optimizer_steps;
    p.scheduler_steps = scheduler.num_steps();
    p.dynamic_scaler = scaler.is_dynamic();
    p.scale = scaler.scale();
    p.growth = scaler.growth_tracker();
    p.hysteresis = scaler.hysteresis_tracker();
    // Layout-free dropout position: the global micro-batch index (micro-batches x DP).
    p.dropout_micro_batches = static_cast<std::int64_t>(micro_batches_done) * dp_size;
    p.seed = static_cast<std::int64_t>(seed);
    p.flops = flops;
    p.rng.seed = seed;
    p.rng.next_stream = dropout_stream(micro_batches_done, dp_size, dp_rank);
    p.rng.dp_rank = dp_rank;
    p.rng.dp_size = dp_size;
    return p;
}

void TrainingState::restore(const SavedProgress& p, const std::optional<optim::LrScheduler>& schedule,
                            int dp_size, int dp_rank) {
    iteration = p.iteration;
    consumed_train = p.consumed_train;
    consumed_valid = p.consumed_valid;
    skipped = p.skipped;
    flops = p.flops;
    if (schedule) scheduler = *schedule;
    scheduler.set_num_steps(p.scheduler_steps);
    // A checkpoint of a bf16/fp32 run holds no dynamic scaler state: an fp16 run from it
    // starts its scaler afresh, as Megatron does when the checkpoint has none.
    if (scaler.is_dynamic() && p.dynamic_scaler) scaler.restore(p.scale, p.growth, p.hysteresis);
    micro_batches_done = p.micro_batches_done(dp_size, dp_rank);
}

}  // namespace gpt::train
