// A learnable synthetic data source for trainer tests (their configurations: tiny.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.hpp"
#include "tiny.hpp"
#include "train/step/batch_source.hpp"

namespace gpt::test {

// Sample i is a walk t -> (5 t + 3) mod V from a start that depends on i: the next token is
// a function of the current one, so a working model drives the loss towards 0. Samples are
// handed out like Megatron's sampler: each micro-step covers mbs x dp consecutive samples,
// data-parallel rank r taking [r mbs, (r+1) mbs).
class WalkSource final : public train::MicroBatchSource {
public:
    WalkSource(int vocab, int seq, int mbs, int dp_rank = 0, int dp_size = 1,
               std::int64_t first_sample = 0)
        : vocab_(vocab), seq_(seq), mbs_(mbs), dp_rank_(dp_rank), dp_size_(dp_size),
          consumed_(first_sample) {}
    void next(std::int32_t* tokens) override {
        for (int j = 0; j < mbs_; ++j) {
            const std::int64_t sample = consumed_ + dp_rank_ * mbs_ + j;
            std::int64_t t = (sample * 7919 + 13) % vocab_;
            for (int k = 0; k <= seq_; ++k) {
                tokens[j * (seq_ + 1) + k] = static_cast<std::int32_t>(t);
                t = (5 * t + 3) % vocab_;
            }
        }
        consumed_ += static_cast<std::int64_t>(mbs_) * dp_size_;
    }

private:
    int vocab_, seq_, mbs_, dp_rank_, dp_size_;
    std::int64_t consumed_;
};

}  // namespace gpt::test
