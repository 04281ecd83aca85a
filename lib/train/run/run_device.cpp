// resolve_device apart from the backend factory (device_backend.cpp): resolving a run links
// only the question whether CUDA is usable, not the backends themselves.
#include <string>
#include <utility>

#include "backend/backend.hpp"
#include "train/run/device_backend.hpp"

namespace gpt::train {

RunDevice resolve_device(DeviceKind requested) {
    if (requested != DeviceKind::Auto) return {requested, ""};
    if (GPT_HAVE_CUDA) {
        std::string why = cuda_unusable_reason();
        if (why.empty()) return {DeviceKind::Cuda, ""};
        return {DeviceKind::Cpu, std::move(why)};  // no usable GPU: the CPU instead
    }
    return {DeviceKind::Cpu, ""};
}

}  // namespace gpt::train
