#include <cuda_runtime.h>

#include "core/device_wait.hpp"
#include "core/errors.hpp"
#include "core/wait.hpp"
#include "core/watchdog.hpp"

namespace gpt {

void wait_for_cuda_event(void* event, const char* what) {
    auto ev = static_cast<cudaEvent_t>(event);
    // Named for the watchdog's report unless the caller (a communicator) recorded more.
    watchdog::LabelScope label(what);
    cudaError_t rc = cudaSuccess;
    poll_until(
        [&] {
            rc = cudaEventQuery(ev);
            return rc != cudaErrorNotReady;
        },
        what);
    GPT_REQUIRE(rc == cudaSuccess, DeviceError, "CUDA ", what, " failed: ", cudaGetErrorString(rc));
}

void wait_for_cuda_stream(void* stream, const char* what) {
    cudaEvent_t ev = nullptr;
    GPT_REQUIRE(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) == cudaSuccess, DeviceError,
                "CUDA event for ", what, " could not be created");
    struct Destroy {
        cudaEvent_t ev;
        ~Destroy() { cudaEventDestroy(ev); }
    } destroy{ev};
    cudaStream_t s = stream ? static_cast<cudaStream_t>(stream) : cudaStreamLegacy;
    const cudaError_t rc = cudaEventRecord(ev, s);
    GPT_REQUIRE(rc == cudaSuccess, DeviceError, "CUDA ", what, " failed: ", cudaGetErrorString(rc));
    wait_for_cuda_event(ev, what);
}

}  // namespace gpt
