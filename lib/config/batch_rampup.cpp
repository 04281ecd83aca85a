#include "config/batch_rampup.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <sstream>

#include "core/errors.hpp"

namespace gpt {

namespace {

// The first step whose threshold is above `consumed` (end: none is).
std::vector<BatchStep>::const_iterator step_after(const std::vector<BatchStep>& steps, std::int64_t consumed) {
    return std::upper_bound(steps.begin(), steps.end(), consumed,
                            [](std::int64_t c, const BatchStep& s) { return c < s.first_sample; });
}

// The last step whose threshold `consumed` has reached (the first is at 0).
const BatchStep& step_at(const std::vector<BatchStep>& steps, std::int64_t consumed) {
    const auto next = step_after(steps, consumed);
    return next == steps.begin() ? steps.front() : *std::prev(next);
}

// A step schedule's iterations from `consumed` on, a step at a time: fn(first sample, batch,
// iterations). Iterations start while fewer than `train_samples` are consumed and, within a
// step, advance by its batch, so a schedule of trillions of tokens is a handful of calls.
template <class Fn>
void walk_steps(const std::vector<BatchStep>& steps, std::int64_t consumed, std::int64_t train_samples, Fn fn) {
    for (std::int64_t c = consumed; c < train_samples;) {
        const std::int64_t batch = step_at(steps, c).batch;
        const auto next = step_after(steps, c);
        const std::int64_t limit = next == steps.end() ? train_samples : std::min(next->first_sample, train_samples);
        const std::int64_t k = (limit - c + batch - 1) / batch;  // >= 1: c < limit
        fn(c, batch, k);
        c += k * batch;
    }
}

}  // namespace

BatchRampup::BatchRampup(const Config& cfg)
    : final_(cfg.training.global_batch_size),
      train_iters_(cfg.training.train_iters),
      train_samples_(cfg.training.train_samples),
      seq_length_(cfg.model.seq_length) {
    const TrainingConfig& t = cfg.training;
    if (!t.step_batch_size_schedule.empty()) {
        GPT_REQUIRE(t.rampup_batch_size.empty(), UsageError,
                    "--rampup-batch-size and --step-batch-size-schedule both set the global batch's schedule; give one");
        steps_ = parse_step_batch_schedule(t.step_batch_size_schedule, seq_length_);
        GPT_REQUIRE(t.train_iters == 0, UsageError,
                    "--step-batch-size-schedule needs sample-based training: give --train-samples, not --train-iters "
                    "(Megatron's --train-iters would size the learning-rate schedule and the datasets by "
                    "micro-batch x DP samples per iteration)");
        for (std::size_t i = 1; i < steps_.size(); ++i)
            GPT_REQUIRE(steps_[i].batch >= steps_[i - 1].batch, UsageError, "--step-batch-size-schedule: the batch ",
                        steps_[i].batch, " from sample ", steps_[i].first_sample, " is smaller than the ",
                        steps_[i - 1].batch, " before it; a schedule that decreases the batch is not supported");
        GPT_REQUIRE(steps_.back().batch <= std::numeric_limits<int>::max(), UsageError,
                    "--step-batch-size-schedule: the batch ", steps_.back().batch, " is too large");
        // Megatron refuses --global-batch-size beside the schedule; its own GPT-3 example gives
        // the last entry's, which says the same and is taken.
        GPT_REQUIRE(final_ == 0 || final_ == steps_.back().batch, UsageError, "--global-batch-size ", final_,
                    " disagrees with --step-batch-size-schedule, whose last batch is ", steps_.back().batch,
                    "; leave --global-batch-size out");
        final_ = steps_.back().batch;
        return;
    }
    const std::vector<int>& r = t.rampup_batch_size;
    if (r.empty()) return;
    GPT_REQUIRE(r.size() == 3, UsageError, "--rampup-batch-size takes 3 values (start batch size, batch size "
                "increment, ramp-up samples), got ", r.size());
    GPT_REQUIRE(r[0] > 0 && r[1] > 0 && r[2] > 0, UsageError, "--rampup-batch-size ", r[0], " ", r[1], " ", r[2],
                ": the start batch size, the increment and the ramp-up samples must be positive");
    GPT_REQUIRE(t.train_iters == 0, UsageError,
                "--rampup-batch-size needs sample-based training: give --train-samples, not --train-iters "
                "(as Megatron asserts: the number of iterations follows from the ramp)");
    start_ = r[0];
    increment_ = r[1];
    samples_ = r[2];
    GPT_REQUIRE(final_ > start_, UsageError, "--rampup-batch-size starts at ", start_,
                ", which is not below --global-batch-size ", final_, ": there is nothing to ramp up");
    GPT_REQUIRE((final_ - start_) % increment_ == 0, UsageError, "--rampup-batch-size: global-batch-size ", final_,
                " - start ", start_, " = ", final_ - start_, " is not divisible by the increment ", increment_);
    per_increment_ = static_cast<double>(samples_) / static_cast<double>((final_ - start_) / increment_);
}

const char* BatchRampup::flag() const {
    return !steps_.empty() ? "--step-batch-size-schedule" : start_ > 0 ? "--rampup-batch-size" : "";
}

std::int64_t BatchRampup::global_batch_at(std::int64_t consumed) const {
    if (!steps_.empty()) return step_at(steps_, consumed).batch;
    if (!on() || consumed > samples_) return final_;
    // Megatron: int(consumed_samples / rampup_samples_per_increment), in double.
    const auto steps = static_cast<std::int64_t>(static_cast<double>(consumed) / per_increment_);
    return start_ + steps * increment_;
}

std::vector<BatchStep> BatchRampup::taken_from(std::int64_t consumed) const {
    std::vector<BatchStep> out;
    auto take = [&out](std::int64_t at, std::int64_t batch) {
        if (out.empty() || out.back().batch != batch) out.push_back({at, batch});
    };
    if (!steps_.empty()) {
        walk_steps(steps_, consumed, train_samples_, [&](std::int64_t at, std::int64_t batch, std::int64_t) { take(at, batch); });
        return out;
    }
    if (!on()) return {{consumed, final_}};
    std::int64_t c = consumed;
    for (; c <= samples_; c += global_batch_at(c)) take(c, global_batch_at(c));
    take(c, final_);
    return out;
}

BatchRampup::Length BatchRampup::run_length() const {
    Length n;
    if (!steps_.empty()) {
        walk_steps(steps_, 0, train_samples_, [&n](std::int64_t at, std::int64_t batch, std::int64_t iterations) {
            n.iterations += iterations;
            n.samples = at + iterations * batch;
        });
        return n;
    }
    if (!on()) {
        n.iterations = train_iters_ > 0 ? train_iters_ : train_samples_ / final_;
        n.samples = n.iterations * final_;
        return n;
    }
    while (n.samples <= samples_ && n.samples <= train_samples_) {
        n.samples += global_batch_at(n.samples);
        ++n.iterations;
    }
    // Whole final batches; a partial last one is dropped, as in Megatron.
    if (train_samples_ > n.samples) {
        const std::int64_t more = (train_samples_ - n.samples) / final_;
        n.iterations += more;
        n.samples += more * final_;
    }
    return n;
}

void BatchRampup::check_layout(int micro_batch, int dp, int interleaved_pp, std::int64_t consumed) const {
    if (!on()) return;
    for (const BatchStep& s : taken_from(consumed))
        split_global_batch(s.batch, micro_batch, dp, interleaved_pp,
                           std::string(flag()) + ": the global batch " + std::to_string(s.batch) + " (from sample " +
                               std::to_string(s.first_sample) + ")");
}

std::vector<std::int64_t> BatchRampup::batch_sizes() const {
    std::vector<std::int64_t> out;
    if (!steps_.empty()) {
        for (const BatchStep& s : taken_from(0)) out.push_back(s.batch);
        return out;
    }
    if (!on()) return {final_};
    for (std::int64_t b = start_; b <= final_; b += increment_) out.push_back(b);
    return out;
}

std::string BatchRampup::describe() const {
    std::ostringstream os;
    if (!steps_.empty()) {
        for (std::size_t i = 0; i < steps_.size(); ++i)
            os << (i ? ", " : "") << steps_[i].batch << " from sample " << steps_[i].first_sample << " ("
               << steps_[i].first_sample * seq_length_ << " tokens)";
        return os.str();
    }
    os << start_ << " -> " << final_ << " in steps of " << increment_ << ", one every " << per_increment_
       << " samples, the whole batch after " << samples_ << " samples";
    return os.str();
}

std::vector<std::int64_t> ramp_micro_batch_counts(const Config& cfg, std::int64_t micro_batches, int dp,
                                                  int interleaved_pp) {
    std::vector<std::int64_t> out;
    const BatchRampup schedule(cfg);
    if (!schedule.on()) return out;
    const std::int64_t per_step = std::int64_t{cfg.training.micro_batch_size} * dp;
    for (const std::int64_t b : schedule.batch_sizes())
        if (per_step > 0 && b % per_step == 0 && b / per_step < micro_batches && (b / per_step) % interleaved_pp == 0)
            out.push_back(b / per_step);
    return out;
}

std::int64_t split_global_batch(std::int64_t global, int micro_batch, int dp, int interleaved_pp,
                                const std::string& what) {
    const std::int64_t per_step = std::int64_t{micro_batch} * dp;
    GPT_REQUIRE(per_step > 0 && global % per_step == 0, UsageError, what, " is not divisible by micro-batch-size x DP = ",
                micro_batch, " x ", dp, " = ", per_step);
    const std::int64_t micro_batches = global / per_step;
    GPT_REQUIRE(interleaved_pp <= 1 || micro_batches % interleaved_pp == 0, UsageError,
                "the interleaved schedule needs the ", micro_batches, " micro-batches per iteration (", what,
                " / (micro-batch-size x DP)) to be a multiple of pipeline-model-parallel-size ", interleaved_pp);
    return micro_batches;
}

}  // namespace gpt
