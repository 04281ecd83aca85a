// Megatron's --rampup-batch-size <start> <increment> <ramp-up samples>: the global batch
// starts at <start> and grows by <increment> each time another (global - start) / increment-th
// of the ramp-up samples is consumed, reaching --global-batch-size, which it keeps once more
// than <ramp-up samples> are consumed (Megatron-LM's RampupBatchsizeNumMicroBatchesCalculator;
// Megatron replaced it in April 2026 by --step-batch-size-schedule and since ignores the flag).
// Training is sample-based (--train-samples), as Megatron asserts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace gpt {

class BatchRampup {
public:
    // The resolved flags' schedule (global batch known); none, a constant global batch,
    // without --rampup-batch-size. UsageError for values Megatron asserts against, one line.
    explicit BatchRampup(const TrainingConfig& t);
    bool on() const { return start_ > 0; }
    // The global batch after `consumed` training samples.
    std::int64_t global_batch_at(std::int64_t consumed) const;

    // Megatron's update_train_iters: --train-iters, or for --train-samples the ramp's
    // iterations (while no more than the ramp-up and the train samples are consumed) and then
    // whole final global batches; and the samples those iterations consume.
    struct Length {
        std::int64_t iterations = 0, samples = 0;
    };
    Length run_length(const TrainingConfig& t) const;

    // Every global batch the ramp takes must split into micro-batches of this layout
    // (split_global_batch): UsageError naming the first that does not and when it comes.
    void check_layout(int micro_batch, int dp, int interleaved_pp) const;

    // Every global batch the ramp can take, start, start + increment, ..., the final one
    // (just the global batch without a ramp): what buffers sized per iteration must hold.
    std::vector<std::int64_t> batch_sizes() const;

    // "start -> final in steps of increment, one every N samples up to M samples", for the log.
    std::string describe() const;

private:
    std::int64_t start_ = 0, increment_ = 0, samples_ = 0, final_ = 0;
    double per_increment_ = 0.0;  // ramp-up samples per increment, a real number as in Megatron
};

// The micro-batch counts per data-parallel rank that iterations may take below
// `micro_batches` (the global batch's): with a ramp, those of its smaller batches that split
// over the layout (the others are refused when they come); none without. Buffers sized per
// iteration hold the largest need over these and the global batch's: fewer micro-batches can
// keep more alive at once (the interleaved schedule's warm-up covers all of them when few).
std::vector<std::int64_t> ramp_micro_batch_counts(const TrainingConfig& t, std::int64_t micro_batches, int dp,
                                                  int interleaved_pp);

// Micro-batches per data-parallel rank for a global batch: global / (micro-batch x DP), which
// must divide evenly and, for the interleaved schedule (interleaved_pp > 1), be a multiple of
// the pipeline size. UsageError naming `what` (the global batch's origin) otherwise.
std::int64_t split_global_batch(std::int64_t global, int micro_batch, int dp, int interleaved_pp,
                                const std::string& what);

}  // namespace gpt
