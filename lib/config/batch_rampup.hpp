// The global batch of each iteration, from the samples consumed so far: constant, or one of
// Megatron's two schedules.
// - --rampup-batch-size <start> <increment> <ramp-up samples>: the global batch starts at
//   <start> and grows by <increment> each time another (global - start) / increment-th of the
//   ramp-up samples is consumed, reaching --global-batch-size, which it keeps once more than
//   <ramp-up samples> are consumed (Megatron-LM's RampupBatchsizeNumMicroBatchesCalculator;
//   Megatron replaced it in April 2026 by --step-batch-size-schedule and since ignores it).
// - --step-batch-size-schedule "0:B0 T1:B1 ...": B_i from T_i tokens on (step_batch_schedule.hpp,
//   Megatron's StepBatchsizeNumMicroBatchesCalculator); the global batch is the last entry's.
// Either schedule trains by samples (--train-samples): Megatron asserts it for the ramp, and
// with a step schedule its --train-iters sizes the learning-rate schedule and the datasets by
// micro-batch x DP samples per iteration, which no run takes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/step_batch_schedule.hpp"

namespace gpt {

class BatchRampup {
public:
    // The resolved flags' schedule (the global batch known); none, a constant global batch,
    // without either flag. UsageError for values Megatron refuses, and for what this
    // implementation does not take (both flags; a step schedule whose batch decreases, or
    // whose last batch is not a given --global-batch-size), one line.
    explicit BatchRampup(const Config& cfg);
    bool on() const { return start_ > 0 || !steps_.empty(); }
    // The flag that set the schedule, for messages ("" when none).
    const char* flag() const;
    // The global batch after `consumed` training samples.
    std::int64_t global_batch_at(std::int64_t consumed) const;
    // The global batch the schedule ends at: --global-batch-size, or the step schedule's last.
    std::int64_t final_batch() const { return final_; }

    // Megatron's update_train_iters: --train-iters, or for --train-samples the iterations
    // while fewer than the train samples are consumed (the ramp: while no more than the
    // ramp-up and the train samples are consumed, then whole final global batches); and the
    // samples those iterations consume.
    struct Length {
        std::int64_t iterations = 0, samples = 0;
    };
    Length run_length() const;

    // Every global batch the run takes from `consumed` samples on must split into
    // micro-batches of this layout (split_global_batch): UsageError naming the first that does
    // not and the sample it comes at. (Megatron checks each when it comes; a resumed run checks
    // from where it resumes, so a run scaled up after its small first batches may go on.)
    void check_layout(int micro_batch, int dp, int interleaved_pp, std::int64_t consumed = 0) const;

    // Every global batch the run can take (just the global batch without a schedule): what
    // buffers sized per iteration must hold.
    std::vector<std::int64_t> batch_sizes() const;

    // "start -> final in steps of increment, one every N samples up to M samples", or the step
    // schedule's "B0 from sample 0, B1 from sample S1 (T1 tokens), ...", for the log.
    std::string describe() const;

private:
    // The batches the run takes from `consumed` on, each with the sample it first comes at.
    std::vector<BatchStep> taken_from(std::int64_t consumed) const;

    std::int64_t start_ = 0, increment_ = 0, samples_ = 0, final_ = 0;
    double per_increment_ = 0.0;  // ramp-up samples per increment, a real number as in Megatron
    std::vector<BatchStep> steps_;  // --step-batch-size-schedule, sorted by threshold
    std::int64_t train_iters_ = 0, train_samples_ = 0;
    int seq_length_ = 0;
};

// The micro-batch counts per data-parallel rank that iterations may take below
// `micro_batches` (the global batch's): with a schedule, those of its smaller batches that split
// over the layout (the others are refused when they come); none without. Buffers sized per
// iteration hold the largest need over these and the global batch's: fewer micro-batches can
// keep more alive at once (the interleaved schedule's warm-up covers all of them when few).
std::vector<std::int64_t> ramp_micro_batch_counts(const Config& cfg, std::int64_t micro_batches, int dp,
                                                  int interleaved_pp);

// Micro-batches per data-parallel rank for a global batch: global / (micro-batch x DP), which
// must divide evenly and, for the interleaved schedule (interleaved_pp > 1), be a multiple of
// the pipeline size. UsageError naming `what` (the global batch's origin) otherwise.
std::int64_t split_global_batch(std::int64_t global, int micro_batch, int dp, int interleaved_pp,
                                const std::string& what);

}  // namespace gpt
