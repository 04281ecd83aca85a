// Dropout mask generation shared by the dropout ops and both attention kernels.
#pragma once

#include <cstdint>

#include "core/philox.hpp"

namespace gpt::cpu {

// out[i] = keep(seed, first + i) ? keep_scale : 0 for i in [0, n): the multiplier that
// applies dropout (keep_scale = 1/(1-p)). Philox blocks are generated 16 at a time in a
// loop the compiler vectorises.
void dropout_multipliers(std::uint64_t seed, std::uint64_t first, std::int64_t n,
                         std::uint32_t threshold, float keep_scale, float* out);

}  // namespace gpt::cpu
