// Megatron's vocabulary padding, the one rule every part uses (the run's arguments table,
// the model's dimensions, the planner's shapes): the smallest multiple of
// make-vocab-size-divisible-by x TP that holds the vocabulary, so every tensor-parallel
// shard of the embedding is a multiple of make-vocab-size-divisible-by.
#pragma once

#include <cstdint>

namespace gpt {

// Plain arithmetic; callers check that divisible_by and tp_size are positive.
constexpr std::int64_t pad_vocab(std::int64_t vocab, std::int64_t divisible_by, std::int64_t tp_size) {
    const std::int64_t multiple = divisible_by * tp_size;
    return (vocab + multiple - 1) / multiple * multiple;
}

}  // namespace gpt
