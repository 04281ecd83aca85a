// How many iterations a run trains and how many samples each data split must provide: the one
// computation gpt_pretrain and prepare_cache share, so the offline tool builds exactly the
// index caches the run will look for.
#pragma once

#include <array>
#include <cstdint>

#include "config/config.hpp"

namespace gpt::train {

// --train-iters, or for --train-samples Megatron's update_train_iters (whole global
// batches; through the schedule with --rampup-batch-size or --step-batch-size-schedule).
// UsageError when neither is given.
std::int64_t resolve_train_iters(const Config& cfg);

// Megatron's get_train_valid_test_num_samples: train = the samples the iterations consume
// (iterations x global batch, or the schedule's sum); valid = (iterations / eval-interval + 1) x
// eval-iters x global batch; test = eval-iters x global batch (the evaluation always runs
// whole global batches, as Megatron's).
std::array<std::int64_t, 3> dataset_samples(const Config& cfg);

}  // namespace gpt::train
