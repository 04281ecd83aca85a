// make_backend: picks the implementation for a device name.
#include "backend/backend.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "core/device_info.hpp"
#include "core/errors.hpp"

#if GPT_HAVE_CUDA_BACKEND
namespace gpt::cuda {
// Defined by backend/cuda (built only with CUDA); make_backend checked that a GPU is visible.
std::unique_ptr<Backend> make_cuda_backend(int local_rank);
}  // namespace gpt::cuda
#endif

namespace gpt {

std::unique_ptr<Backend> make_backend(const std::string& device, int local_rank) {
    if (device == "cpu") return std::make_unique<cpu::CpuBackend>();
    if (device == "cuda") {
        const std::string why = cuda_unusable_reason();
        if (!why.empty()) GPT_THROW(UsageError, why);
#if GPT_HAVE_CUDA_BACKEND
        return cuda::make_cuda_backend(local_rank);
#else
        (void)local_rank;
#endif
    }
    GPT_THROW(UsageError, "unknown device '", device, "' (expected cpu or cuda)");
}

}  // namespace gpt
