#include "config/batch_rampup.hpp"

#include <sstream>

#include "core/errors.hpp"

namespace gpt {

BatchRampup::BatchRampup(const TrainingConfig& t) {
    final_ = t.global_batch_size;
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

std::int64_t BatchRampup::global_batch_at(std::int64_t consumed) const {
    if (!on() || consumed > samples_) return final_;
    // Megatron: int(consumed_samples / rampup_samples_per_increment), in double.
    const auto steps = static_cast<std::int64_t>(static_cast<double>(consumed) / per_increment_);
    return start_ + steps * increment_;
}

BatchRampup::Length BatchRampup::run_length(const TrainingConfig& t) const {
    Length n;
    if (!on()) {
        n.iterations = t.train_iters > 0 ? t.train_iters : t.train_samples / t.global_batch_size;
        n.samples = n.iterations * t.global_batch_size;
        return n;
    }
    while (n.samples <= samples_ && n.samples <= t.train_samples) {
        n.samples += global_batch_at(n.samples);
        ++n.iterations;
    }
    // Whole final batches; a partial last one is dropped, as in Megatron.
    if (t.train_samples > n.samples) {
        const std::int64_t more = (t.train_samples - n.samples) / final_;
        n.iterations += more;
        n.samples += more * final_;
    }
    return n;
}

void BatchRampup::check_layout(int micro_batch, int dp, int interleaved_pp) const {
    if (!on()) return;
    for (std::int64_t consumed = 0; consumed <= samples_;) {
        const std::int64_t g = global_batch_at(consumed);
        split_global_batch(g, micro_batch, dp, interleaved_pp,
                           "--rampup-batch-size: the global batch " + std::to_string(g) + " (from sample " +
                               std::to_string(consumed) + ")");
        consumed += g;
    }
}

std::vector<std::int64_t> BatchRampup::batch_sizes() const {
    if (!on()) return {final_};
    std::vector<std::int64_t> out;
    for (std::int64_t b = start_; b <= final_; b += increment_) out.push_back(b);
    return out;
}

std::string BatchRampup::describe() const {
    std::ostringstream os;
    os << start_ << " -> " << final_ << " in steps of " << increment_ << ", one every " << per_increment_
       << " samples, the whole batch after " << samples_ << " samples";
    return os.str();
}

std::vector<std::int64_t> ramp_micro_batch_counts(const TrainingConfig& t, std::int64_t micro_batches, int dp,
                                                  int interleaved_pp) {
    std::vector<std::int64_t> out;
    if (t.rampup_batch_size.empty()) return out;
    const std::int64_t per_step = std::int64_t{t.micro_batch_size} * dp;
    for (const std::int64_t b : BatchRampup(t).batch_sizes())
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
