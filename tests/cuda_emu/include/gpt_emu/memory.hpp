// The emulator's device memory: one reserved arena, kept inaccessible (PROT_NONE) while
// host code runs, opened for the duration of kernels, copies and communication. A host
// dereference of a device pointer then faults, and the SIGSEGV handler names the address.
#pragma once

#include <cstddef>
#include <functional>

#include "cuda_runtime.h"

namespace gpt_emu {

void* device_alloc(std::size_t bytes);      // nullptr when the arena is full
bool device_free(void* p);                  // false: not a live allocation
bool is_device(const void* p, std::size_t bytes = 1);  // [p, p+bytes) inside one live allocation
bool in_arena(const void* p);               // anywhere in the arena (live or not)
// Narrows a live allocation to its first `bytes` (a caching allocator's block handed out for
// a smaller request): copies and library calls are checked against them, and the red zone
// (the 256 bytes after them, refilled with 0xff) catches kernels writing past them.
void set_extent(void* p, std::size_t bytes);

// While one of these lives (nestable), device memory is readable and writable by host code.
class DeviceAccess {
public:
    DeviceAccess();
    ~DeviceAccess();
    DeviceAccess(const DeviceAccess&) = delete;
    DeviceAccess& operator=(const DeviceAccess&) = delete;
};

// Asynchronous work that completes later (emulated NCCL point-to-point over MPI): the arena
// stays open while any is pending, and synchronising the stream (or an event recorded on it
// afterwards, or the device) calls `complete` in order.
void stream_add_pending(cudaStream_t stream, std::function<void()> complete);
// Work deferred in stream order that needs no open arena meanwhile (it opens it when it
// runs): a collective's landing, its send-buffer check.
void stream_add_deferred(cudaStream_t stream, std::function<void()> work);
// The same for a posted send: stream_complete_work leaves it pending.
void stream_add_pending_send(cudaStream_t stream, std::function<void()> complete);
void stream_complete(cudaStream_t stream);  // runs the pending completions of one stream
// Runs what is queued on one stream (and the work it waits for) except sends' completions,
// which stay pending until a synchronisation: before an NCCL operation reads its buffers.
void stream_complete_work(cudaStream_t stream);
void complete_all();                        // every stream's

// Sticky launch/runtime error for cudaGetLastError, with a message for cudaGetErrorString.
void set_error(cudaError_t err, const char* message);

}  // namespace gpt_emu
