// The SIMT emulator's device side: runs our CUDA kernels, compiled as host C++, on the CPU.
//
// Each kernel thread is a fiber with its own stack; a block's fibers run one after another on the
// launching OS thread and switch only at __syncthreads, __syncwarp and the warp-collective
// operations (shuffles, mma.sync, ldmatrix, wgmma.mma_async), which are barriers over the
// block or warp, setmaxnreg, a barrier over the warpgroup (128 threads), a wgmma.wait_group
// whose operations not every warp of the warpgroup has issued yet (it waits for them), and
// an mbarrier wait that finds its phase incomplete (the thread tries again in the next round).
// Threads that returned no longer count at barriers (as on sm_70+). A barrier some live thread can never
// reach (divergent __syncthreads) fails the launch with a message instead of hanging.
// `__shared__` locals are function statics, whose bytes each block keeps while another block
// of the grid runs, and each block has its own dynamic shared memory; both are poisoned
// (0xff) for each block so unwritten reads show as NaN.
//
// The order fibers run between barriers is one CUDA allows; GPT_EMU_SCHEDULE=reverse and
// =warps (simt.cpp) choose others, so a missing barrier shows as a different result; they
// also start a grid's blocks last to first (reverse) or in a per-launch permutation (warps)
// and keep several alive at once, taking turns at barriers, shuffles and atomics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <type_traits>

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
struct alignas(8) float2 {
    float x, y;
};
inline float2 make_float2(float x, float y) { return float2{x, y}; }
struct alignas(16) float4 {
    float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

typedef struct CUstream_st* cudaStream_t;

namespace gpt_emu {

// The emulated device: sm_80 (A100: compute capability 8.0, 163 KiB of opt-in shared memory
// a block), or with `on` sm_90 (H100/H200: 9.0, 227 KiB), for the sm_90 kernels' tests.
void emulate_sm90(bool on);

// The running thread's coordinates (set by the scheduler before it resumes a fiber).
extern uint3 g_thread_idx;
extern uint3 g_block_idx;
extern dim3 g_block_dim;
extern dim3 g_grid_dim;
extern unsigned char* g_dynamic_smem;

// Barriers of the running thread's block / warp.
void block_barrier();
void warp_barrier();
// Warp exchange: every lane of the warp offers `v` (8 bytes at most), then reads lane `src`'s.
// Fails the launch unless `mask` names the calling lane and only lanes taking part.
std::uint64_t warp_exchange(std::uint64_t v, int src_lane, std::uint32_t mask);
// Fills a static `__shared__` variable with 0xff once per block (rewrite_cu.pl adds the call
// after each declaration), so a read nobody in the block wrote shows as NaN.
void poison_static_shared(void* p, std::size_t bytes);
// Warp gather: every lane offers `bytes` bytes (kWarpGatherMax at most) and receives all 32
// lanes' offers, lane after lane, in `all` (32 * bytes), after one warp barrier. Returns the
// mask of lanes that offered at this barrier; lanes that exited, lanes missing from a partial
// warp and lanes that met the barrier elsewhere (a __syncwarp) are absent, their bytes stale.
constexpr std::size_t kWarpGatherMax = 32;
std::uint32_t warp_gather(const void* mine, std::size_t bytes, void* all);
int lane_id();
// Where a thread may yield to other blocks of its grid (before an atomic).
void atomic_point();
// Named barrier `id` (1..15) of `count` threads: bar.sync (wait) or bar.arrive (!wait).
void named_barrier(int id, int count, bool wait);
// setmaxnreg: warpgroup-collective (all 128 threads, one count in 24..256, a multiple of 8);
// register allocation itself is not modelled.
void setmaxnreg(int count);

// Runs body on grid x block threads (blocks in order); returns false and sets the emulated
// runtime's sticky error for a bad configuration or a failed block.
void launch_kernel(const void* kernel, dim3 grid, dim3 block, std::size_t smem,
                   cudaStream_t stream, const std::function<void()>& body);

// rewrite_cu.pl calls this at the top of a kernel declared __launch_bounds__(max_threads):
// a block larger than the bound fails the launch.
void check_launch_bounds(unsigned max_threads);

// A kernel's pointer argument must point into a live device allocation (or at its end).
// Otherwise sets the runtime's error naming the argument and returns false: a host pointer
// or a freed buffer handed to a kernel faults, or worse, on a GPU. Pointers inside struct
// arguments are not seen.
bool check_kernel_pointer(int index, const void* p);

template <typename K>
struct Launch {
    K kernel;
    dim3 grid, block;
    std::size_t smem;
    cudaStream_t stream;
    template <typename... A>
    void operator()(A&&... args) const {
        int index = 0;
        bool ok = true;
        auto check = [&](const auto& a) {
            using T = std::decay_t<decltype(a)>;
            if constexpr (std::is_pointer_v<T>)
                if (ok && a != nullptr) ok = check_kernel_pointer(index, static_cast<const void*>(a));
            ++index;
        };
        (check(args), ...);
        if (!ok) return;
        // Arguments are copied at launch, as CUDA does with kernel parameters.
        auto body = [k = kernel, ... a = std::forward<A>(args)]() { k(a...); };
        launch_kernel(reinterpret_cast<const void*>(kernel), grid, block, smem, stream, body);
    }
};

// What `kernel<<<grid, block, smem, stream>>>(args)` becomes (rewrite_cu.pl).
template <typename K>
Launch<K*> launch(K* kernel, dim3 grid, dim3 block, std::size_t smem = 0,
                  cudaStream_t stream = nullptr) {
    return Launch<K*>{kernel, grid, block, smem, stream};
}

}  // namespace gpt_emu

#define threadIdx (::gpt_emu::g_thread_idx)
#define blockIdx (::gpt_emu::g_block_idx)
#define blockDim (::gpt_emu::g_block_dim)
#define gridDim (::gpt_emu::g_grid_dim)

inline void __syncthreads() { ::gpt_emu::block_barrier(); }
inline void __syncwarp(unsigned = 0xffffffffu) { ::gpt_emu::warp_barrier(); }

template <typename T>
T __shfl_sync_from(unsigned mask, T v, int src) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    bits = ::gpt_emu::warp_exchange(bits, src, mask);
    T out;
    std::memcpy(&out, &bits, sizeof(T));
    return out;
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    const int lane = ::gpt_emu::lane_id();
    return __shfl_sync_from(mask, v, (lane ^ lane_mask) % width + lane / width * width);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    const int lane = ::gpt_emu::lane_id(), base = lane / width * width;
    const int src = lane % width + static_cast<int>(delta) < width ? lane + static_cast<int>(delta) : lane;
    (void)base;
    return __shfl_sync_from(mask, v, src);
}
template <typename T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
    const int lane = ::gpt_emu::lane_id();
    return __shfl_sync_from(mask, v, lane / width * width + src_lane % width);
}

// Fibers of a launch never run concurrently: plain read-modify-write is atomic here. Under the
// interleaved schedules the thread first lets other blocks run (atomic_point), so atomics of
// several blocks alternate.
template <typename T>
T atomicAdd(T* p, T v) {
    ::gpt_emu::atomic_point();
    const T old = *p;
    *p = old + v;
    return old;
}
// sm_90's vector atomics (CUDA's atomicAdd(float2*, float2)): each component is an atomic of
// its own, in no promised order (here each lets other blocks run first, as the scalar one);
// the address must be 8-byte aligned, as on the GPU.
inline float2 atomicAdd(float2* p, float2 v) {
    if (reinterpret_cast<std::uintptr_t>(p) % 8)
        throw std::runtime_error("atomicAdd(float2*): address not 8-byte aligned");
    return float2{atomicAdd(&p->x, v.x), atomicAdd(&p->y, v.y)};
}
template <typename T>
T atomicMax(T* p, T v) {
    ::gpt_emu::atomic_point();
    const T old = *p;
    if (v > old) *p = v;
    return old;
}
