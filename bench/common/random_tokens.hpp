// The benchmarks' training data: four fixed random batches of micro_batch x (seq + 1)
// tokens, cycled, as the PyTorch peers do (/work/shared/peers), so no data pipeline or file
// I/O enters the measurement.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "train/step/batch_source.hpp"

namespace gpt::bench {

class RandomTokens final : public gpt::train::MicroBatchSource {
public:
    RandomTokens(int vocab, int seq, int micro_batch) {
        std::mt19937 rng(0);
        std::uniform_int_distribution<int> u(0, vocab - 1);
        batches_.resize(4, std::vector<std::int32_t>(static_cast<std::size_t>(micro_batch) * (seq + 1)));
        for (auto& b : batches_)
            for (auto& t : b) t = u(rng);
    }
    void next(std::int32_t* tokens) override {
        const auto& b = batches_[i_++ % batches_.size()];
        std::copy(b.begin(), b.end(), tokens);
    }
    const std::vector<std::vector<std::int32_t>>& batches() const { return batches_; }

private:
    std::size_t i_ = 0;
    std::vector<std::vector<std::int32_t>> batches_;  // 4 x (b, s + 1)
};

}  // namespace gpt::bench
