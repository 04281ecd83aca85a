// Megatron's args.params_dtype, the one rule every part uses (the trainer's run, the
// planner's shapes, gpt_generate's model): fp16 under --fp16, bf16 under --bf16, else fp32.
// The two flags exclude each other (validate refuses both).
#pragma once

#include "config/config.hpp"
#include "core/dtype.hpp"

namespace gpt {

inline DType params_dtype(const TrainingConfig& t) {
    return t.fp16 ? DType::F16 : t.bf16 ? DType::BF16 : DType::F32;
}

}  // namespace gpt
