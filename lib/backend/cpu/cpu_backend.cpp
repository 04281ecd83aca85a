// CpuBackend: memory accounting and the plain memory operations.
#include "backend/cpu/cpu_backend.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/errors.hpp"

namespace gpt::cpu {

namespace {
// A cache line and the widest vector register (AVX-512).
constexpr std::size_t kAlignment = 64;
}  // namespace

CpuBackend::CpuBackend() : scratch_(8) {}

CpuBackend::~CpuBackend() {
    // Buffers the caller forgot are released so a long test run does not leak.
    for (auto& [p, bytes] : sizes_) std::free(p);
}

void* CpuBackend::alloc(std::size_t bytes) {
    // aligned_alloc needs a size that is a multiple of the alignment; 0 bytes still gets a
    // unique pointer so free() and accounting stay uniform.
    std::size_t rounded = (std::max<std::size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, rounded);
    if (!p) GPT_THROW(DeviceError, "CPU backend: cannot allocate ", bytes, " bytes (",
                      in_use_, " bytes already in use). HINT: reduce the micro-batch size, "
                      "or use activation recomputation");
    std::lock_guard lock(mem_mutex_);
    sizes_[p] = bytes;
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
    return p;
}

void CpuBackend::free(void* p) {
    if (!p) return;
    {
        std::lock_guard lock(mem_mutex_);
        auto it = sizes_.find(p);
        GPT_ASSERT(it != sizes_.end(), "free() of a pointer this backend did not allocate");
        in_use_ -= it->second;
        sizes_.erase(it);
    }
    std::free(p);
}

void CpuBackend::copy_to_device(void* dst, const void* host_src, std::size_t bytes) {
    if (bytes) std::memcpy(dst, host_src, bytes);
}
void CpuBackend::copy_to_host(void* host_dst, const void* src, std::size_t bytes) {
    if (bytes) std::memcpy(host_dst, src, bytes);
}
void CpuBackend::copy(void* dst, const void* src, std::size_t bytes) {
    if (bytes && dst != src) std::memmove(dst, src, bytes);
}
void CpuBackend::zero(void* p, std::size_t bytes) {
    if (bytes) std::memset(p, 0, bytes);
}

std::size_t CpuBackend::bytes_in_use() const {
    std::lock_guard lock(mem_mutex_);
    return in_use_;
}
std::size_t CpuBackend::peak_bytes() const {
    std::lock_guard lock(mem_mutex_);
    return peak_;
}

float* CpuBackend::scratch(int slot, std::size_t floats) {
    GPT_ASSERT(slot >= 0 && slot < static_cast<int>(scratch_.size()));
    auto& v = scratch_[slot];
    if (v.size() < floats) v.resize(floats);
    return v.data();
}

}  // namespace gpt::cpu
