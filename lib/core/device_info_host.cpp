// Host-side facts and, in builds without CUDA, the answers for "no GPU".
#include <fstream>
#include <sstream>
#include <string>

#include "core/device_info.hpp"
#include "core/errors.hpp"

namespace gpt {

std::size_t host_memory_bytes() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    std::size_t kib = 0;
    std::string unit;
    while (in >> key >> kib >> unit)
        if (key == "MemTotal:") return kib * 1024;
    GPT_THROW(IoError, "cannot read MemTotal from /proc/meminfo");
}

#if !GPT_HAVE_CUDA
bool cuda_built() { return false; }
int visible_gpu_count() { return 0; }
GpuInfo gpu_info(int device) {
    GPT_THROW(DeviceError, "GPU ", device, " requested, but this build has no CUDA support "
              "(rebuild with the CUDA toolkit installed, or use --device cpu)");
}
#endif

}  // namespace gpt
