// Documents packed into one sample kept apart (--reset-position-ids, --reset-attention-mask):
// Megatron's get_ltor_masks_and_position_ids over a micro-batch's inputs, as the two arrays
// the layers read instead of its [s, s] mask.
#pragma once

#include <cstdint>

namespace gpt::model {

// tokens: b samples of `stride` ids (the loader's s + 1; the first s are the inputs). For
// sample bi and position j < s, with e the last end-of-document input before j (none: -1):
//   doc_start[bi s + j] = e + 1   the first key j attends to (Megatron masks keys <= e)
//   positions[bi s + j] = j - (e + 1)   (Megatron's position_ids after its resets)
// An EOD belongs to the document it ends. Either output may be nullptr.
void document_arrays(const std::int32_t* tokens, std::int64_t b, std::int64_t s, std::int64_t stride,
                     std::int32_t eod, std::int32_t* positions, std::int32_t* doc_start);

}  // namespace gpt::model
