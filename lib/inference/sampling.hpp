// Choosing the next token from the logits, in the order HF's warpers and Megatron's
// sample() apply them: temperature, then top-k, then top-p (nucleus), then a draw from
// the renormalised distribution. The draw is Philox keyed by the seed, with the prompt's
// index and the position as the counter, so a prompt's completion does not depend on the
// batch it ran in, the tensor-parallel layout or the thread count.
#pragma once

#include <cstdint>

namespace gpt::inference {

struct SamplingOptions {
    bool greedy = false;       // argmax (also what top_k = 1 gives)
    float temperature = 1.0f;  // > 0
    int top_k = 0;             // 0: off
    float top_p = 0.0f;        // 0 or 1: off; else keep the most likely tokens until their mass reaches top_p
    std::uint64_t seed = 1234;
};

// Throws UsageError naming the flag for a value out of range.
void validate(const SamplingOptions& o);

// The token at `position` of prompt `stream` from logits over [0, vocab): ids at or past
// vocab (the padding rows of the embedding) are never chosen. Ties go to the lower id.
std::int32_t pick_token(const float* logits, std::int64_t vocab, const SamplingOptions& o,
                        std::uint64_t stream, std::uint64_t position);

// The uniform draw in [0, 1) pick_token uses (53 bits of one Philox block).
double sampling_uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t position);

// log softmax(logits)[id] over all n logits (the model's distribution, before temperature
// and filtering), accumulated in double.
double log_prob(const float* logits, std::int64_t n, std::int32_t id);

}  // namespace gpt::inference
