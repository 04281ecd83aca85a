#include "train/run/device_backend.hpp"

#include <utility>

#include "core/device_info.hpp"
#include "core/errors.hpp"

namespace gpt::train {

std::unique_ptr<Backend> make_run_backend(const RunDevice& device, int local_rank) {
    return make_backend(std::string(to_string(device.kind)), local_rank);
}

void check_fp8_device(const Fp8Config& fp8, const Backend& backend, int local_rank) {
    if (!fp8.enabled() || backend.host_memory()) return;
    const int n = visible_gpu_count();
    if (n <= 0) return;
    const GpuInfo g = gpu_info(local_rank % n);  // the GPU make_backend picked
    GPT_REQUIRE(g.compute_capability >= 89, UsageError, "--fp8-format ", fp8.fp8_format, ": GPU ", local_rank % n,
                " (", g.name, ", compute capability ", g.compute_capability / 10, ".", g.compute_capability % 10,
                ") has no FP8 tensor cores (8.9 or later: L40S, H100, H200); train without --fp8-format");
}

}  // namespace gpt::train
