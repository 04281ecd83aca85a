// Resolves derived values (data-parallel size, ffn size, global batch, ...) and rejects
// impossible combinations with a message that names the numbers that disagree.
#pragma once

#include "config/config.hpp"

namespace gpt {

// Model shape, precision and schedule checks that do not depend on the world size.
void validate_model_and_training(Config& cfg);

// Layout checks for `world_size` ranks: TP x PP divides the world, heads % TP, layers % PP
// (and virtual stages), global batch % (micro-batch x DP); fills data_parallel_size and,
// when not given, global_batch_size. Throws UsageError.
void resolve_layout(Config& cfg, int world_size);

// Both of the above, in order.
void validate(Config& cfg, int world_size);

}  // namespace gpt
