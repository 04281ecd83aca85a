// --check-for-spiky-loss: a step whose loss jumps far above the recent ones is skipped (no
// parameter update, like an fp16 overflow), and a run that keeps spiking stops.
//
// Megatron's flag of that name re-runs a step whose loss is 10x the largest recent one; we
// skip instead, and measure "far above" as a z-score over a window of accepted losses:
//   spike  <=>  loss > mean + zscore * max(std, 0.01 * |mean|)
// over the last --spiky-loss-window losses of applied steps (sample standard deviation).
// The floor of 1% of the mean keeps a flat loss's rounding noise from counting as a spike.
// Only upward jumps count (a falling loss is progress), and judging starts once the window
// is full. A spike does not enter the window, so a run of spikes is measured against the
// last good losses.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "config/config.hpp"

namespace gpt::train {

struct SpikeVerdict {
    bool spike = false;
    double mean = 0.0, stddev = 0.0;  // of the window (stddev before the floor)
    double zscore = 0.0;              // (loss - mean) / max(stddev, floor)
};

class SpikeDetector {
public:
    SpikeDetector(int window, double zscore);
    // Judges `loss` against the window; a loss that is no spike joins it.
    SpikeVerdict judge(double loss);
    std::size_t size() const { return window_.size(); }

private:
    std::size_t capacity_;
    double threshold_;
    std::deque<double> window_;
};

// The detector plus the run's bookkeeping: consecutive spikes and the stop.
class SpikeGuard {
public:
    explicit SpikeGuard(const MonitorConfig& m);
    // After the forward-backward of `iteration`; true: skip this step's update. Logs the
    // spike (iteration, loss, the window, the batch's samples [first_sample, +batch) in
    // consumed-samples order). Throws NumericError at --spiky-loss-max-consecutive spikes
    // in a row, naming `last_good_checkpoint` (a description: path and iteration, or none).
    bool skip(double loss, std::int64_t iteration, std::int64_t first_sample, std::int64_t batch,
              const std::string& last_good_checkpoint);
    std::int64_t total() const { return total_; }

private:
    SpikeDetector detector_;
    int max_consecutive_;
    int in_a_row_ = 0;
    std::int64_t total_ = 0;
};

}  // namespace gpt::train
