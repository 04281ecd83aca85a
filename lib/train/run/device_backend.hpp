// The backend a run's --device names, the one rule gpt_pretrain and gpt_generate share: cpu or
// cuda as asked; auto: CUDA when this build has it and a GPU is usable, else the CPU, after
// telling `on_fallback` why (each tool says it in its own voice: the log, or its stderr).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "config/enums.hpp"

namespace gpt::train {

std::unique_ptr<Backend> backend_for_device(DeviceKind device, int local_rank,
                                            const std::function<void(const std::string& why)>& on_fallback);

// FP8 training on a GPU needs FP8 tensor cores (compute capability 8.9 or later: cuBLASLt
// has no FP8 GEMM elsewhere): refused before the first step, naming the GPU. The CPU
// backend runs FP8's reference arithmetic anywhere.
void check_fp8_device(const Fp8Config& fp8, const Backend& backend, int local_rank);

}  // namespace gpt::train
