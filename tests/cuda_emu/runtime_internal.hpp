// Between the emulator's scheduler (simt.cpp) and its runtime (runtime.cpp).
#pragma once

#include <cstddef>

#include "cuda_runtime.h"

namespace gpt_emu {

// sm_80's opt-in limit (A100; H100 allows 227 KiB): the smaller of the two targets we build.
constexpr std::size_t kMaxOptinSmem = 166912;
constexpr std::size_t kDefaultSmem = 48 * 1024;

// The dynamic shared memory a kernel may launch with (cudaFuncSetAttribute raises it).
std::size_t max_dynamic_smem(const void* kernel);

// Work issued to `stream` runs after the work it waits for: completes what is pending on it
// (and, for the legacy default stream, on every blocking stream). False with the sticky
// error set for an unknown stream.
bool stream_before_work(cudaStream_t stream);

}  // namespace gpt_emu
