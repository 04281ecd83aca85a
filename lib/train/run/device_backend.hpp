// The device a run's --device names, resolved once (into RunConfig) by the one rule
// gpt_pretrain and gpt_generate share: cpu or cuda as asked; auto: CUDA when this build has
// it and a GPU is usable, else the CPU, with the reason (each tool says it in its own
// voice when it builds the backend: the log, or its stderr).
#pragma once

#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "config/enums.hpp"

namespace gpt::train {

struct RunDevice {
    DeviceKind kind = DeviceKind::Cpu;  // Cpu or Cuda, never Auto
    // Why --device auto took the CPU although this build has CUDA; "" otherwise (a build
    // without CUDA takes the CPU without a word, as it always did).
    std::string auto_fallback;
};

// Collective-free, on every rank alike; builds nothing. An explicit device is taken as
// asked: building its backend reports one this process cannot use.
RunDevice resolve_device(DeviceKind requested);

// The backend of the resolved device (make_backend's UsageError for a cuda it cannot use).
std::unique_ptr<Backend> make_run_backend(const RunDevice& device, int local_rank);

// FP8 training on a GPU needs FP8 tensor cores (compute capability 8.9 or later: cuBLASLt
// has no FP8 GEMM elsewhere): refused before the first step, naming the GPU. The CPU
// backend runs FP8's reference arithmetic anywhere.
void check_fp8_device(const Fp8Config& fp8, const Backend& backend, int local_rank);

}  // namespace gpt::train
