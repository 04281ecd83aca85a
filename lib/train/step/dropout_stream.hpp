// The dropout stream of a micro-batch: the global micro-batch index (micro-batches done x DP
// + DP rank), so masks follow the samples whatever the layout (Philox keyed by the seed).
// The step draws from it; a checkpoint stores the next one (train/state/saved_progress.hpp).
#pragma once

#include <cstdint>

namespace gpt::train {

inline std::uint64_t dropout_stream(std::uint64_t micro_batches_done, int dp_size, int dp_rank) {
    return micro_batches_done * static_cast<std::uint64_t>(dp_size) + static_cast<std::uint64_t>(dp_rank);
}

}  // namespace gpt::train
