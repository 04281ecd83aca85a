// cuda_unusable_reason apart from make_backend: a caller that only asks (the run's device
// resolution, train/run/run_device.cpp) links neither the CPU backend nor OpenBLAS, whose
// start-up threads would otherwise run in every tool that resolves a run (prepare_cache).
#include <string>

#include "backend/backend.hpp"
#include "core/device_info.hpp"

namespace gpt {

std::string cuda_unusable_reason() {
#if GPT_HAVE_CUDA_BACKEND
    if (visible_gpu_count() > 0) return "";
    return "device 'cuda' requested but no GPU is visible to this process. HINT: check "
           "CUDA_VISIBLE_DEVICES and the Slurm --gpus options, or use --device cpu";
#else
    return "device 'cuda' requested but this build has no CUDA backend (GPT_HAVE_CUDA=" +
           std::to_string(GPT_HAVE_CUDA) + "). HINT: rebuild with -DGPT_CUDA=ON on a machine with "
           "the CUDA toolkit, or use --device cpu";
#endif
}

}  // namespace gpt
