// The size of one checkpoint of a configuration, for the start-up check that --save has
// room for the next save (lib/config/validate.hpp, check_output_paths).
#pragma once

#include <cstdint>

#include "config/config.hpp"

namespace gpt::plan {

// Bytes of model_optim.h5 (docs/checkpoint-format.md): every parameter once in its global
// shape in the training precision, plus fp32 main parameters and both Adam moments. Layout,
// attributes and RNG blobs add well under 1% for any real model and are not counted.
std::uint64_t predicted_checkpoint_bytes(const Config& cfg);

}  // namespace gpt::plan
