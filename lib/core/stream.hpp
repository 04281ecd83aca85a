// A device's ordered queue of work, as an explicit object: the backend that computes on it
// creates it, and the communicators that move the backend's buffers (dist/comm_nccl.hpp)
// order their work against it -- nobody relies on a default stream by convention.
// Device-agnostic: the handle is a cudaStream_t for the CUDA backend; the host backend has
// none (its ops run in call order on the calling thread).
#pragma once

namespace gpt {

class Stream {
public:
    Stream() = default;  // the host: no device queue
    explicit Stream(void* native) : native_(native) {}
    void* native() const { return native_; }  // cudaStream_t on CUDA; nullptr on the host
    bool on_host() const { return native_ == nullptr; }

private:
    void* native_ = nullptr;
};

}  // namespace gpt
