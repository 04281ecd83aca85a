// The CUDA profiler hooks: NVTX ranges (nvtx3, header-only, from the CUDA toolkit) and
// cudaProfilerStart/Stop for --profile. An NVTX range costs a check of a null function
// pointer when no profiler is attached; the CPU-only build compiles the ranges out and has
// no profiler. The emulator build records both (tests/cuda_emu/nvtx.cpp) for its tests.
#pragma once

namespace gpt::profiler {

#if GPT_HAVE_NVTX
void range_push(const char* name);
void range_pop();
#else
inline void range_push(const char*) {}
inline void range_pop() {}
#endif

// cudaProfilerStart/Stop exist in this build (the real CUDA runtime).
bool available();
// cudaProfilerStart / cudaProfilerStop; DeviceError when the runtime refuses.
void start();
void stop();

}  // namespace gpt::profiler
