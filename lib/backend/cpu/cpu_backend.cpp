// CpuBackend: memory accounting and the plain memory operations.
#include "backend/cpu/cpu_backend.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <omp.h>

#include "backend/cpu/blas.hpp"
#include "core/errors.hpp"

namespace gpt::cpu {

namespace {
// A cache line and the widest vector register (AVX-512).
constexpr std::size_t kAlignment = 64;
constexpr std::size_t kPageAlignedFrom = std::size_t{1} << 20;

// Ranks started on this node by the MPI launcher (MPICH/Hydra, Open MPI), 1 if unknown.
int ranks_on_node() {
    for (const char* name : {"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
        if (const char* v = std::getenv(name)) {
            int n = std::atoi(v);
            if (n > 0) return n;
        }
    }
    return 1;
}

// Copies of at least this many bytes are split over the rank's OpenMP threads: one core's
// memcpy does not reach a node's memory bandwidth, and an --async-save's host copy is what
// training stalls for. Smaller copies stay on this thread (a parallel region's start-up,
// some microseconds, is a tenth of a 1 MiB copy's time).
constexpr std::size_t kParallelCopyMin = std::size_t{2} << 20;
// Per thread and iteration: large enough to stream, small enough to balance.
constexpr std::size_t kCopyChunk = std::size_t{1} << 20;

void copy_bytes(void* dst, const void* src, std::size_t bytes) {
    if (bytes < kParallelCopyMin || omp_get_max_threads() == 1) {
        if (bytes) std::memcpy(dst, src, bytes);
        return;
    }
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
    const auto chunks = static_cast<std::int64_t>((bytes + kCopyChunk - 1) / kCopyChunk);
#pragma omp parallel for schedule(static)
    for (std::int64_t c = 0; c < chunks; ++c) {
        const std::size_t at = static_cast<std::size_t>(c) * kCopyChunk;
        std::memcpy(d + at, s + at, std::min(kCopyChunk, bytes - at));
    }
}
}  // namespace

CpuBackend::CpuBackend() : scratch_(8) {
    ensure_blas_kernels();
    // Ranks on one node share its cores. OpenMP's default (one thread per core in every
    // rank) oversubscribes them, and spinning idle threads then steal time from the other
    // ranks' work. Unless the user chose a count (OMP_NUM_THREADS), each rank takes its share.
    if (!std::getenv("OMP_NUM_THREADS")) {
        const int ranks = ranks_on_node();
        if (ranks > 1) omp_set_num_threads(std::max(1, omp_get_num_procs() / ranks));
    }
}

CpuBackend::~CpuBackend() {
    // Buffers the caller forgot are released so a long test run does not leak.
    for (auto& [p, bytes] : sizes_) std::free(p);
}

void* CpuBackend::alloc(std::size_t bytes) {
    // aligned_alloc needs a size that is a multiple of the alignment; 0 bytes still gets a
    // unique pointer so free() and accounting stay uniform. Large buffers (the model's
    // parameters and optimizer state among them) start on a page: a synchronous checkpoint
    // save writes them with O_DIRECT in place (ckpt/direct_writes.cpp), at most a page lost.
    const std::size_t align = bytes >= kPageAlignedFrom ? kHostAlign : kAlignment;
    std::size_t rounded = (std::max<std::size_t>(bytes, 1) + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded);
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
    copy_bytes(dst, host_src, bytes);
}
void CpuBackend::copy_to_host(void* host_dst, const void* src, std::size_t bytes) {
    copy_bytes(host_dst, src, bytes);
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
