// Text samples during training (--sample-interval N --sample-prompt TEXT --sample-tokens M,
// as llm.c prints them): every N iterations the tensor-parallel group of data-parallel rank
// 0 runs the current model through lib/inference's KV-cached generation, and rank 0 logs
// the text. The sample reads a copy of the parameters and draws (with --sample-seed) from
// its own Philox counter, so training's state, its dropout streams and its losses are the
// same with and without it. Needs PP = 1 (config/validate.cpp refuses others): each TP rank
// then holds its slice of the whole model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "dist/process_groups.hpp"
#include "model/gpt_model.hpp"

namespace gpt::train {

class TrainingSampler {
public:
    // Loads the tokenizer and encodes the prompt; UsageError when the prompt leaves no room
    // in the model's positions. tp: the TP group's communicator for backend memory (the
    // model's own, dist::DataGroups::tp()).
    TrainingSampler(const Config& cfg, dist::ProcessGroups& groups, dist::Communicator& tp, Backend& backend,
                    const model::GptModel& chunk);
    // At iterations that are multiples of the interval: generates (collective over the TP
    // group of DP rank 0; other ranks return at once) and logs on rank 0.
    void after_iteration(std::int64_t iteration, const model::GptModel& chunk);

private:
    SampleConfig cfg_;
    dist::ProcessGroups& groups_;
    dist::Communicator& tp_;
    Backend& be_;
    std::vector<std::int32_t> prompt_;
    std::vector<std::string> token_text_;  // bytes of each token id
    std::int32_t eod_ = 0;
    std::int64_t vocab_ = 0;
};

}  // namespace gpt::train
