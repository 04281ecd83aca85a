// Backend's host-memory defaults: what a backend whose copy_to_host is synchronous needs
// (the CPU backend, test and benchmark wrappers). The CUDA backend overrides all of them
// with pinned memory and stream-ordered copies (cuda/cuda_backend.cu).
#include <algorithm>
#include <cstdlib>
#include <new>

#include "backend/backend.hpp"
#include "core/errors.hpp"

namespace gpt {

namespace {
// The copies were done when issued: nothing is left to wait for.
class CompleteEvent final : public Backend::HostCopyEvent {
public:
    void wait() override {}
};
}  // namespace

void* Backend::alloc_host(std::size_t bytes) {
    // aligned_alloc wants a multiple of the alignment; 0 bytes still gets a unique pointer.
    const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + kHostAlign - 1) / kHostAlign * kHostAlign;
    void* p = std::aligned_alloc(kHostAlign, rounded);
    GPT_REQUIRE(p != nullptr, DeviceError, "cannot allocate ", bytes, " bytes of host memory for the ",
                name(), " backend's host copy. HINT: the checkpoint's host copy needs free host memory "
                "of the size of this rank's share of the checkpoint");
    return p;
}

void Backend::free_host(void* p) { std::free(p); }

void Backend::copy_to_host_async(void* host_dst, const void* src, std::size_t bytes) {
    copy_to_host(host_dst, src, bytes);
}

std::shared_ptr<Backend::HostCopyEvent> Backend::record_host_copies() { return std::make_shared<CompleteEvent>(); }

}  // namespace gpt
