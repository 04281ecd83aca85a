// CudaBackend: device selection, the caching allocator, copies, and the factory.
#include "backend/cuda/cuda_backend.hpp"

#include <algorithm>

#include "backend/cuda/attention_flash.hpp"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/gemm_algo.hpp"
#include "backend/cuda/gemm_engine.hpp"
#include "backend/cuda/gemm_epilogue.hpp"
#include "backend/cuda/fp8_cast_kernel.hpp"
#include "backend/cuda/fp8_fast_accum.hpp"
#include "core/device_info.hpp"
#include "core/device_wait.hpp"

#if defined(GPT_CUDA_EMU)
#include <gpt_emu/memory.hpp>
#endif

namespace gpt::cuda {

namespace {
// Size classes: powers of two up to 1 MiB (activations of small layers, statistics), then
// multiples of 2 MiB (the granularity cudaMalloc works in anyway). Exact-class reuse keeps
// the cache simple; steady-state training asks for the same sizes every iteration.
std::size_t size_class(std::size_t bytes) {
    constexpr std::size_t kSmall = std::size_t{1} << 20, kLarge = std::size_t{2} << 20;
    if (bytes <= 512) return 512;
    if (bytes <= kSmall) {
        std::size_t c = 512;
        while (c < bytes) c <<= 1;
        return c;
    }
    return (bytes + kLarge - 1) / kLarge * kLarge;
}
}  // namespace

CudaBackend::CudaBackend(int device) : device_(device) {
    // One backend per rank and per thread: the device chosen here stays current for every
    // later call of this process's thread.
    GPT_CUDA_CHECK(cudaSetDevice(device_), "CudaBackend");
    // A blocking stream: work on the legacy default stream (synchronous cudaMemcpy, the
    // staged communicator's copies) still waits for it and it for that work, as before.
    cudaStream_t s = nullptr;
    GPT_CUDA_CHECK(cudaStreamCreate(&s), "CudaBackend");
    stream_ = s;
    gemm_ = std::make_unique<GemmEngine>(s);
    // The switches are read here, so a misspelt GPT_CUDA_GEMM_EPILOGUE (or another) fails at start-up
    // rather than at the first GEMM.
    kernel_variants();
    GPT_CUDA_CHECK(cudaMalloc(&reduce_partials_, kReduceBlocks * (sizeof(double) + sizeof(unsigned long long) + sizeof(int))),
                   "CudaBackend");
}

CudaBackend::~CudaBackend() {
    // Destructors must not throw: errors while tearing down are ignored.
    cudaDeviceSynchronize();
    gemm_.reset();
    cudaFree(reduce_partials_);
    cudaStreamDestroy(cuda_stream(stream()));
    for (auto& [p, blk] : live_) cudaFree(p);
    for (auto& [size, p] : cache_) cudaFree(p);
    for (auto& [p, raw] : host_blocks_) cudaFreeHost(raw);
}

std::string CudaBackend::kernel_variants() const {
    // Flash attention on tensor cores where a call allows it (fp16/bf16, head dims 64-128,
    // 16-byte aligned tensors), CUDA-core kernels elsewhere; "simple": CUDA cores always;
    // "sm90": forward and backward on the wgmma kernels where the device and the call allow
    // it (the forward warp-specialised); "sm90-fwd": that forward only (the backward on the
    // sm80 kernel); "sm90-basic": the basic wgmma forward only; "sm90-bwd-1wg" and
    // "sm90-bwd-plain": sm90's, the backward's one-warpgroup and unpipelined variants;
    // "sm90-dq-atomic": sm90's, the backward's dQ by atomics instead of bulk reductions;
    // "sm90-bwd-ws": sm90's, the backward warp-specialised (TMA loads by a producer warpgroup).
    const FlashKernel k = flash_kernel();
    return detail::concat("attention=",
                          k == FlashKernel::Simple      ? "flash-simple"
                          : k == FlashKernel::Sm90      ? "flash-sm90"
                          : k == FlashKernel::Sm90Fwd   ? "flash-sm90-fwd"
                          : k == FlashKernel::Sm90Basic ? "flash-sm90basic-fwd"
                          : k == FlashKernel::Sm90Bwd1wg ? "flash-sm90-bwd-1wg"
                          : k == FlashKernel::Sm90BwdPlain ? "flash-sm90-bwd-plain"
                          : k == FlashKernel::Sm90DqAtomic ? "flash-sm90-dq-atomic"
                          : k == FlashKernel::Sm90BwdWs ? "flash-sm90-bwd-ws"
                                                        : "flash-sm80",
                          " gemm_epilogue=", gemm_epilogue_mode_name(gemm_epilogue_mode()),
                          " gemm_algo=", gemm_autotune() ? "autotune" : "heuristic",
                          " fp8_fast_accum=", fp8_fast_accum_forward() ? "forward" : "off",
                          " fp8_cast=", fp8_cast_tile_kernel() ? "tile" : "vec",
                          " dropout_draws=", flash_dropout_draws_per_element() ? "element" : "word");
}

void CudaBackend::release_cache() {
    for (auto& [size, p] : cache_) cudaFree(p);
    cache_.clear();
}

void* CudaBackend::alloc(std::size_t bytes) {
    const std::size_t rounded = size_class(bytes);
    std::lock_guard lock(mem_mutex_);
    void* p = nullptr;
    auto it = cache_.find(rounded);
    if (it != cache_.end()) {
        p = it->second;
        cache_.erase(it);
    } else {
        cudaError_t err = cudaMalloc(&p, rounded);
        if (err == cudaErrorMemoryAllocation) {
            // Cached blocks of other sizes may be what stands in the way: give them back.
            cudaGetLastError();
            release_cache();
            err = cudaMalloc(&p, rounded);
        }
        if (err != cudaSuccess) {
            cudaGetLastError();
            GPT_THROW(DeviceError, "CUDA backend: cannot allocate ", bytes, " bytes on device ",
                      device_, " (", in_use_, " bytes in use): ", cudaGetErrorString(err),
                      ". HINT: reduce the micro-batch size, use activation recomputation or "
                      "more tensor/pipeline parallelism (gpt_pretrain --plan-only shows fits)");
        }
    }
    live_[p] = Block{rounded, bytes};
#if defined(GPT_CUDA_EMU)
    // The emulator checks kernels against the bytes asked for, not the size class.
    gpt_emu::set_extent(p, bytes);
#endif
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
    return p;
}

void CudaBackend::free(void* p) {
    if (!p) return;
    std::lock_guard lock(mem_mutex_);
    auto it = live_.find(p);
    GPT_ASSERT(it != live_.end(), "free() of a pointer this CUDA backend did not allocate");
    in_use_ -= it->second.requested;
    cache_.emplace(it->second.rounded, p);
    live_.erase(it);
}

void CudaBackend::copy_to_device(void* dst, const void* host_src, std::size_t bytes) {
    if (bytes) GPT_CUDA_CHECK(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice), "copy_to_device");
}
void CudaBackend::copy_to_host(void* host_dst, const void* src, std::size_t bytes) {
    // Synchronous on the legacy stream, which waits for the (blocking) compute stream: the
    // host sees the result of every op issued before. That work is waited for first by
    // polling, which the hang watchdog bounds (a blocking cudaMemcpy behind a stuck NCCL
    // kernel could not be ended).
    if (!bytes) return;
    wait_for_cuda_stream(stream_, "device work before a copy to the host");
    GPT_CUDA_CHECK(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost), "copy_to_host");
}
void* CudaBackend::alloc_host(std::size_t bytes) {
    // cudaHostAlloc promises less than a page of alignment: one more page, and the pointer
    // handed out is rounded up to kHostAlign inside the block.
    void* raw = nullptr;
    const cudaError_t err = cudaHostAlloc(&raw, bytes + kHostAlign, cudaHostAllocDefault);
    if (err != cudaSuccess) {
        cudaGetLastError();
        GPT_THROW(DeviceError, "CUDA backend: cannot allocate ", bytes, " bytes of pinned host memory: ",
                  cudaGetErrorString(err), ". HINT: the checkpoint's host copy pins this rank's share of "
                  "the checkpoint in host memory; check the node's free memory and the memlock limit (ulimit -l)");
    }
    const auto a = (reinterpret_cast<std::uintptr_t>(raw) + kHostAlign - 1) / kHostAlign * kHostAlign;
    void* p = reinterpret_cast<void*>(a);
    std::lock_guard lock(mem_mutex_);
    host_blocks_[p] = raw;
    return p;
}

void CudaBackend::free_host(void* p) {
    if (!p) return;
    void* raw = nullptr;
    {
        std::lock_guard lock(mem_mutex_);
        auto it = host_blocks_.find(p);
        GPT_ASSERT(it != host_blocks_.end(), "free_host() of a pointer this CUDA backend did not allocate");
        raw = it->second;
        host_blocks_.erase(it);
    }
    // cudaFreeHost waits for the device's work first, so no queued copy lands in freed memory.
    GPT_CUDA_CHECK(cudaFreeHost(raw), "free_host");
}

void CudaBackend::copy_to_host_async(void* host_dst, const void* src, std::size_t bytes) {
    // On the compute stream, as PyTorch's non_blocking copy to pinned memory runs on the
    // current stream. That stream order is what makes the copy safe without any other wait:
    //  - it follows the optimizer step that produced the values (queued before it), so it
    //    reads the new parameters and moments, never a half-updated buffer;
    //  - the next optimizer step, which overwrites the same buffers, is queued after it, so
    //    the GPU starts that step only once the copy has read them (the distributed
    //    optimizer's parameter all-gather too: an NCCL operation waits for the compute
    //    stream's work issued before it, dist/comm_nccl.cpp). The host never waits:
    //    training goes on queuing work; only the background writer waits (HostCopyEvent)
    //    before it reads the host memory.
    // A separate copy stream would let the next forward/backward overlap the copy, but then
    // both orders need explicit events (copy after the step; the next step after the copy),
    // and any writer of these buffers forgetting the second one would corrupt the save.
    if (bytes)
        GPT_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, cuda_stream(stream())),
                       "copy_to_host_async");
}

namespace {
class CudaHostCopyEvent final : public Backend::HostCopyEvent {
public:
    explicit CudaHostCopyEvent(cudaStream_t s) {
        GPT_CUDA_CHECK(cudaEventCreateWithFlags(&ev_, cudaEventDisableTiming), "record_host_copies");
        const cudaError_t err = cudaEventRecord(ev_, s);
        if (err != cudaSuccess) {
            cudaEventDestroy(ev_);
            GPT_CUDA_CHECK(err, "record_host_copies");
        }
    }
    ~CudaHostCopyEvent() override { cudaEventDestroy(ev_); }
    CudaHostCopyEvent(const CudaHostCopyEvent&) = delete;
    CudaHostCopyEvent& operator=(const CudaHostCopyEvent&) = delete;
    // Polled (core/device_wait.hpp), so that the hang watchdog bounds it on any thread.
    void wait() override { wait_for_cuda_event(ev_, "the device-to-host copies of a checkpoint"); }

private:
    cudaEvent_t ev_ = nullptr;
};
}  // namespace

std::shared_ptr<Backend::HostCopyEvent> CudaBackend::record_host_copies() {
    return std::make_shared<CudaHostCopyEvent>(cuda_stream(stream()));
}

void CudaBackend::copy(void* dst, const void* src, std::size_t bytes) {
    if (bytes && dst != src)
        GPT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda_stream(stream())), "copy");
}
void CudaBackend::zero(void* p, std::size_t bytes) {
    if (bytes) GPT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, cuda_stream(stream())), "zero");
}
void CudaBackend::synchronize() {
    // Polling the compute stream's and then the legacy stream's completion (which waits for
    // every blocking stream) bounds the wait by the hang watchdog before the device sync.
    wait_for_cuda_stream(stream_, "device synchronize");
    wait_for_cuda_stream(nullptr, "device synchronize");
    GPT_CUDA_CHECK(cudaDeviceSynchronize(), "synchronize");
}

std::size_t CudaBackend::bytes_in_use() const {
    std::lock_guard lock(mem_mutex_);
    return in_use_;
}
std::size_t CudaBackend::peak_bytes() const {
    std::lock_guard lock(mem_mutex_);
    return peak_;
}

void CudaBackend::do_gemm(const GemmArgs& g) { gemm_->run(*this, g); }

std::unique_ptr<Backend> make_cuda_backend(int local_rank) {
    const int n = visible_gpu_count();
    GPT_REQUIRE(n > 0, UsageError, cuda_unusable_reason());  // make_backend's check, kept for direct callers
    GPT_REQUIRE(local_rank >= 0, UsageError, "make_backend: negative local rank ", local_rank);
    // Ranks of a node share its GPUs round-robin (one GPU per rank when counts match).
    return std::make_unique<CudaBackend>(local_rank % n);
}

}  // namespace gpt::cuda
