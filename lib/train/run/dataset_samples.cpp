#include "train/run/dataset_samples.hpp"

#include "config/validate.hpp"

namespace gpt::train {

std::int64_t resolve_train_iters(const TrainingConfig& t) {
    if (t.train_iters > 0) return t.train_iters;
    validate_training_length(t);  // a Config built by hand; resolve_run checked the run's
    return t.train_samples / t.global_batch_size;
}

std::array<std::int64_t, 3> dataset_samples(const TrainingConfig& t) {
    const std::int64_t gbs = t.global_batch_size;
    const std::int64_t iters = resolve_train_iters(t);
    const std::int64_t eval_runs = t.eval_interval > 0 ? iters / t.eval_interval + 1 : 1;
    return {iters * gbs, eval_runs * t.eval_iters * gbs, static_cast<std::int64_t>(t.eval_iters) * gbs};
}

}  // namespace gpt::train
