// The emulator's cudaProfilerStart/Stop: recorded (gpt_emu/profiler_log.hpp), so tests can
// check where the --profile window opens and closes.
#pragma once

#include <cuda_runtime.h>

cudaError_t cudaProfilerStart(void);
cudaError_t cudaProfilerStop(void);
