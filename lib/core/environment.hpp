// The environment variables that change what a run does, each read and checked here (and
// nowhere else), so that app/gpt_pretrain can print their values under the arguments.
// Read on every call: tests and tools may set them while a process runs.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpt::env {

// DEVICE_MEMORY_GB: the device memory per rank the planner assumes, in GiB (UsageError
// unless a positive number).
std::optional<double> device_memory_gb();
// GPT_CPU_CORES: the cores of a node the planner's CPU preset shares among its ranks
// (UsageError unless a positive integer).
std::optional<int> cpu_cores();
// GPT_CUDA_FLASH=simple: the CUDA backend's flash attention uses its CUDA-core kernels.
bool cuda_flash_simple();

// Every variable above as (name, value or "None"), for the printed arguments.
std::vector<std::pair<std::string, std::string>> rows();

}  // namespace gpt::env
