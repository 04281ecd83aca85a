// The profiler hooks of the CUDA build (see profiler.hpp).
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "core/errors.hpp"
#include "core/profiler.hpp"

namespace gpt::profiler {

void range_push(const char* name) { nvtxRangePushA(name); }
void range_pop() { nvtxRangePop(); }

bool available() { return true; }

void start() {
    const cudaError_t e = cudaProfilerStart();
    GPT_REQUIRE(e == cudaSuccess, DeviceError, "cudaProfilerStart failed: ", cudaGetErrorString(e));
}

void stop() {
    const cudaError_t e = cudaProfilerStop();
    GPT_REQUIRE(e == cudaSuccess, DeviceError, "cudaProfilerStop failed: ", cudaGetErrorString(e));
}

}  // namespace gpt::profiler
