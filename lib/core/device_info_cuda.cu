// Device queries through the CUDA runtime (only in builds with the CUDA backend).
#include <cuda_runtime.h>

#include "core/device_info.hpp"
#include "core/errors.hpp"

namespace gpt {

bool cuda_built() { return true; }

int visible_gpu_count() {
    int n = 0;
    // No driver or no device is an ordinary answer here (CPU nodes run the same binary).
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

GpuInfo gpu_info(int device) {
    cudaDeviceProp prop{};
    cudaError_t err = cudaGetDeviceProperties(&prop, device);
    if (err != cudaSuccess)
        GPT_THROW(DeviceError, "cudaGetDeviceProperties(", device, ") failed: ", cudaGetErrorString(err));
    GpuInfo info;
    info.name = prop.name;
    info.total_memory = prop.totalGlobalMem;
    info.compute_capability = prop.major * 10 + prop.minor;
    return info;
}

}  // namespace gpt
