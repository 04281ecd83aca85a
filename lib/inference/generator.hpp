// The generation loop over a KvModel, as Megatron's generate does it for prompts of
// different lengths: one pass over the shortest prompt's length for the whole batch, then
// one position at a time for every sequence, where a sequence still inside its prompt is
// fed its next prompt token instead of the chosen one. A sequence stops at EOD or after
// max_new_tokens; the batch stops when every sequence has.
#pragma once

#include <cstdint>
#include <vector>

#include "inference/kv_model.hpp"
#include "inference/sampling.hpp"

namespace gpt::inference {

struct GenerationRequest {
    std::vector<std::vector<std::int32_t>> prompts;  // token ids, at least one each
    int max_new_tokens = 64;
    SamplingOptions sampling;
    std::int64_t vocab = 0;       // ids that may be chosen: [0, vocab)
    std::int32_t eod = 50256;     // <|endoftext|>: ends a sequence (kept in its tokens)
    int batch_size = 8;           // prompts per batch
    // false: every step runs the whole sequence so far as a fresh pass without the cache
    // (the reference the tests hold the cached steps to).
    bool use_cache = true;
};

struct Generation {
    std::vector<std::int32_t> tokens;  // the new tokens (the EOD that ended it included)
    std::vector<double> log_probs;     // of each, under the model (log softmax of the logits)
    bool eod = false;                  // stopped at EOD (else at max_new_tokens or the model's length)
};

// Where the model's time went (wall clock around KvModel::forward, logits on the host
// included; sampling excluded): the prompt passes and the one-token steps.
struct GenerationStats {
    std::int64_t prefill_tokens = 0, decode_tokens = 0;  // tokens fed, summed over the batch
    double prefill_s = 0.0, decode_s = 0.0;
};

// Collective over the model's TP group: every rank returns the same generations.
std::vector<Generation> generate(KvModel& model, const GenerationRequest& request,
                                 GenerationStats* stats = nullptr);

}  // namespace gpt::inference
