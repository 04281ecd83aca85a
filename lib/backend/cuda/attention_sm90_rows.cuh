// Row statistics of a wgmma score fragment for the sm_90 attention forwards
// (attention_flash_sm90.cu, attention_flash_sm90_ws.cu): in an m64nN accumulator the four
// lanes of a quad (lane / 4) share a row, each holding two adjacent columns of every 8
// (wgmma_sm90.cuh), so a row's max or sum is the lane's own over its registers, then over
// the quad by two shuffles.
#pragma once

#include <cmath>
#include <cstdint>

namespace gpt::cuda::sm90rows {

__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// The causal online softmax's new running max of row half rr (rows g and g + 8 of the warp's
// 16) of a score tile of kKeys keys starting at key j0, for query row i: keys past the row
// (j > i) are set to -inf in sc first where the tile reaches past the row (`diagonal`); m is
// the running max so far (-inf before the first tile). Keys past the sequence only meet rows
// past it, which are never written, so they need no mask of their own.
template <int kKeys>
__device__ __forceinline__ float masked_row_max(float (&sc)[kKeys / 2], int rr, bool diagonal, std::int64_t j0,
                                                std::int64_t i, int q, float m) {
    float mx = m;
#pragma unroll
    for (int c = 0; c < kKeys / 8; ++c)
#pragma unroll
        for (int cc = 0; cc < 2; ++cc) {
            float& v = sc[4 * c + 2 * rr + cc];
            if (diagonal && j0 + 8 * c + 2 * q + cc > i) v = -INFINITY;
            mx = fmaxf(mx, v);
        }
    return quad_max(mx);
}

}  // namespace gpt::cuda::sm90rows
