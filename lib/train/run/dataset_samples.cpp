#include "train/run/dataset_samples.hpp"

#include "config/batch_rampup.hpp"
#include "config/validate.hpp"

namespace gpt::train {

std::int64_t resolve_train_iters(const Config& cfg) {
    validate_training_length(cfg.training);  // a Config built by hand; resolve_run checked the run's
    return BatchRampup(cfg).run_length().iterations;
}

std::array<std::int64_t, 3> dataset_samples(const Config& cfg) {
    const TrainingConfig& t = cfg.training;
    validate_training_length(t);
    const std::int64_t gbs = t.global_batch_size;
    const BatchRampup::Length train = BatchRampup(cfg).run_length();
    const std::int64_t eval_runs = t.eval_interval > 0 ? train.iterations / t.eval_interval + 1 : 1;
    return {train.samples, eval_runs * t.eval_iters * gbs, static_cast<std::int64_t>(t.eval_iters) * gbs};
}

}  // namespace gpt::train
