// The backend a run's --device names, the one rule gpt_pretrain and gpt_generate share: cpu or
// cuda as asked; auto: CUDA when this build has it and a GPU is usable, else the CPU, after
// telling `on_fallback` why (each tool says it in its own voice: the log, or its stderr).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "config/enums.hpp"

namespace gpt::train {

std::unique_ptr<Backend> backend_for_device(DeviceKind device, int local_rank,
                                            const std::function<void(const std::string& why)>& on_fallback);

}  // namespace gpt::train
