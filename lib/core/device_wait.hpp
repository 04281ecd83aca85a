// Bounded waits for the CUDA device (builds with the CUDA backend only). A blocking
// cudaDeviceSynchronize / cudaEventSynchronize / synchronous cudaMemcpy cannot be ended: a
// kernel of NCCL waiting for a stopped peer would hold the host there forever. These poll
// the device's progress through gpt::poll_until instead, so the hang watchdog
// (core/watchdog.hpp) sees the wait and can end the job, naming it.
// The handles are void* so that this header stays free of CUDA's.
#pragma once

namespace gpt {

// Until `event` (a cudaEvent_t) has completed; DeviceError on a device error.
void wait_for_cuda_event(void* event, const char* what);
// Until the work issued so far to `stream` (a cudaStream_t; nullptr: the legacy default
// stream) has completed; DeviceError on a device error.
void wait_for_cuda_stream(void* stream, const char* what);

}  // namespace gpt
