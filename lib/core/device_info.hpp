// What accelerators this process can see. Device-agnostic: the CUDA build answers from the
// CUDA runtime (device_info_cuda.cu), the CPU-only build says there are none.
#pragma once

#include <cstddef>
#include <string>

namespace gpt {

struct GpuInfo {
    std::string name;
    std::size_t total_memory = 0;  // bytes
    int compute_capability = 0;    // e.g. 90 for sm_90
};

bool cuda_built();        // compiled with the CUDA backend
int visible_gpu_count();  // 0 without CUDA, driver or devices
GpuInfo gpu_info(int device);  // throws DeviceError for a bad index

// Physical memory of this host in bytes (/proc/meminfo MemTotal), for the CPU backend.
std::size_t host_memory_bytes();

}  // namespace gpt
