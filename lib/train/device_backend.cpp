#include "train/device_backend.hpp"

#include "core/errors.hpp"

namespace gpt::train {

std::unique_ptr<Backend> backend_for_device(DeviceKind device, int local_rank,
                                            const std::function<void(const std::string& why)>& on_fallback) {
    if (device != DeviceKind::Auto) return make_backend(std::string(to_string(device)), local_rank);
    if (GPT_HAVE_CUDA) {
        try {
            return make_backend("cuda", local_rank);
        } catch (const UsageError& e) {
            on_fallback(e.what());  // no usable GPU: the CPU instead
        }
    }
    return make_backend("cpu", local_rank);
}

}  // namespace gpt::train
