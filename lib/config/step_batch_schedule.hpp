// Megatron's --step-batch-size-schedule "THRESHOLD:BATCH THRESHOLD:BATCH ...": the global batch
// is BATCH once THRESHOLD tokens are consumed (Megatron-LM's StepBatchsizeNumMicroBatchesCalculator,
// which replaced --rampup-batch-size in April 2026). Megatron always passes --seq-length, so the
// thresholds are tokens, floor-divided into samples; both numbers take the suffixes K, M, B, T
// (1e3 ... 1e12) and real values ("2.4B"), truncated as Python's int(float(x) * suffix).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpt {

struct BatchStep {
    std::int64_t first_sample = 0;  // the threshold, in samples
    std::int64_t batch = 0;         // the global batch from there on
};

// The steps sorted by threshold (entries may come in any order, separated by spaces or
// commas, as in Megatron). UsageError, one line naming the flag, for what Megatron refuses:
// an empty schedule, an entry without ':', a number it cannot read, a first threshold that is
// not 0 samples, thresholds that are not strictly increasing in samples, a batch below 1.
std::vector<BatchStep> parse_step_batch_schedule(const std::string& text, int seq_length);

}  // namespace gpt
