// What warp-specialised kernels (FA3's producer and consumer warpgroups) use besides wgmma and
// TMA: named barriers, which synchronise a subset of the block's warps (bar.sync / bar.arrive
// with an id 1..15 and a thread count, a multiple of 32; id 0 is __syncthreads'), sm_70+;
// and setmaxnreg, which moves registers between warpgroups (a producer gives its own up, the
// consumers take more), sm_90a only (__trap() elsewhere). The CPU emulator substitutes its
// own (gpt_emu/simt.hpp): named barriers with the same counting, setmaxnreg checked for being
// warpgroup-collective but not modelled.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/wgmma_sm90.cuh"  // GPT_WGMMA_PTX

namespace gpt::cuda {

// Waits until `threads` threads (arrivals included) have reached barrier `id`.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::named_barrier(id, threads, true);
#elif defined(__CUDA_ARCH__)
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#endif
}
// Counts this thread's warp at barrier `id` without waiting (a producer signalling).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::named_barrier(id, threads, false);
#elif defined(__CUDA_ARCH__)
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#endif
}

// The warpgroup's per-thread register budget raised (kInc) or lowered to kRegs (24..256, a
// multiple of 8); every thread of the warpgroup executes it.
template <int kRegs, bool kInc>
__device__ __forceinline__ void setmaxnreg() {
    static_assert(kRegs >= 24 && kRegs <= 256 && kRegs % 8 == 0, "setmaxnreg takes 24..256, a multiple of 8");
#if defined(GPT_CUDA_EMU)
    ::gpt_emu::setmaxnreg(kRegs);
#elif GPT_WGMMA_PTX
    if constexpr (kInc)
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
    else
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#else
    __trap();
#endif
}

}  // namespace gpt::cuda
