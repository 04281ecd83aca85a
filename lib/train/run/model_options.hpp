// A run's model options resolved from its Config in one place: the training chunks (through
// RunConfig::model_options), the converter's one-rank model and gpt_generate's KV-cached
// model all take them from here, so an option added to the model reaches every tool.
#pragma once

#include "config/config.hpp"
#include "core/dtype.hpp"
#include "model/model_spec.hpp"

namespace gpt::train {

// Precision, dropout, recompute, flash attention, FP8, seed: what training runs with.
model::ModelOptions model_options_of(const Config& cfg, DType dtype);

// The same for generation (config/params_dtype's precision, GELU, norm epsilon), less what
// only training does: dropout off (generation is deterministic apart from its sampling), FP8
// off (the KV-cached forward casts the checkpoint's weights to dtype, it keeps no FP8
// copies), no recompute and no sequence parallelism (there is no backward).
model::ModelOptions generation_model_options(const Config& cfg);

}  // namespace gpt::train
