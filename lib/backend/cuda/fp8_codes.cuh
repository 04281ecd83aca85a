// FP8 codes on the device, shared by the cast kernels (fp8.cu) and the kernels that write an
// FP8 linear's input codes beside their own output (the norms, issue 34): the hardware's
// satfinite round-to-nearest-even conversion and the amax as an atomicMax on the bits of |x|
// (non-negative floats order as their bits; every NaN sorts above infinity, so a NaN sticks as
// on the CPU).
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "backend/backend.hpp"
#include "backend/cuda/cuda_common.cuh"

namespace gpt::cuda {

__device__ __forceinline__ std::uint8_t to_fp8(float v, bool e4m3) {
    return static_cast<std::uint8_t>(
        __nv_cvt_float_to_fp8(v, __NV_SATFINITE, e4m3 ? __NV_E4M3 : __NV_E5M2));
}

__device__ __forceinline__ unsigned abs_bits(float v) { return __float_as_uint(v) & 0x7fffffffu; }

// One warp's maximum, then one atomic per warp. Every lane of the warp must call it.
__device__ __forceinline__ void amax_commit(unsigned m, float* amax) {
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x + threadIdx.y * blockDim.x) % 32 == 0 && m != 0)
        atomicMax(reinterpret_cast<unsigned*>(amax), m);
}

// Where a kernel writes the codes of what it stores: q (nullptr: no codes), the scale, the
// amax (nullable) and the format. Passed by value to the kernel.
struct Fp8CodesArg {
    const float* scale = nullptr;
    std::uint8_t* q = nullptr;
    float* amax = nullptr;
    bool e4m3 = true;
};

// The kernels' argument for a backend's codes (nullptr: none).
inline Fp8CodesArg codes_arg(const Backend::Fp8Codes* codes) {
    if (!codes) return {};
    return {codes->scale, codes->q, codes->amax, codes->format == Fp8Format::E4M3};
}

// The codes of n values as they are stored in T (each rounded to T first, as a later cast
// pass would read them back), written as one n-byte store at q (n-byte aligned); m takes
// their amax bits.
template <typename T, int N>
__device__ __forceinline__ void store_codes(const float (&v)[N], float scale, bool e4m3, std::uint8_t* q,
                                            unsigned& m) {
    struct alignas(N) Bytes {
        std::uint8_t b[N];
    } out;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        T stored;
        stf(&stored, v[i]);
        const float r = ldf(&stored);
        m = max(m, abs_bits(r));
        out.b[i] = to_fp8(r * scale, e4m3);
    }
    *reinterpret_cast<Bytes*>(q) = out;
}

}  // namespace gpt::cuda
