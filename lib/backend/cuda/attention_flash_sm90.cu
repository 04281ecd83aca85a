// Causal flash attention forward for Hopper (sm_90a) on wgmma (wgmma_sm90.cuh), the ideas
// of FlashAttention-3 (Shah et al. 2024) in their simplest form:
//  - One warpgroup (128 threads) per block and 64 query rows: S = Q K^T for a 64-key tile
//    is one m64n64 accumulator (mma_ss, Q and K from shared memory), the online softmax
//    runs on that fragment in registers (four lanes share a row, as in the sm80 kernel), and
//    P, rounded to 16 bits, is already the A operand of O += P V (mma_rs, V N-major from
//    shared memory), so scores never leave registers.
//  - Tiles are in the canonical no-swizzle layouts (8x8 core matrices), written with plain
//    16-byte loads and stores; rows past the sequence are zero-filled. No TMA, no
//    double buffering, no warp specialization or pingpong yet: correctness first.
//  - No dropout: calls with dropout > 0 stay on the sm80 kernel (attention_flash.cu).
// Statistics and output as flash_fwd_sm80 writes them: O / l in [s, pairs, hn], and
// lse = m * scale + log(l) with m the raw row max, so the sm80 backward consumes them.
#include <cmath>

#include "backend/cuda/attention_flash_params.cuh"
#include "backend/cuda/attention_sm90_rows.cuh"
#include "backend/cuda/attention_sm90_tiles.cuh"
#include "backend/cuda/wgmma_sm90.cuh"

namespace gpt::cuda {

namespace {

namespace w = wgmma;
using namespace sm90tiles;  // kmajor_at/nmajor_at, their descriptors, load_tile
using sm90rows::masked_row_max;
using sm90rows::quad_sum;

constexpr int kThreads90 = 128;  // one warpgroup
constexpr int kRows90 = 64;      // query rows per block (wgmma's M)
constexpr int kKeys90 = 64;      // keys per tile (N of Q K^T, K depth of P V)
constexpr float kLog2e90 = 1.4426950408889634f;

template <int HN>
constexpr int kTileBytes = 64 * HN * 2;  // a 64-row tile of Q, K or V
template <int HN>
constexpr int kSmem90 = 3 * kTileBytes<HN> + 1024;  // Q, K, V and the alignment slack

template <int HN, typename T>
__global__ void __launch_bounds__(kThreads90) flash_fwd_sm90(FlashParams P, const T* qkv, T* out, float* lse) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char* qs = smem_raw + (1024 - w::smem_address(smem_raw) % 1024) % 1024;
    unsigned char* ks = qs + kTileBytes<HN>;
    unsigned char* vs = ks + kTileBytes<HN>;
    const int t = threadIdx.x, warp = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
    const std::int64_t pair = blockIdx.y;
    const std::int64_t i0 = static_cast<std::int64_t>(gridDim.x - 1 - blockIdx.x) * kRows90;  // diagonal-heavy first
    const T* qb = qkv + flash_q_at(P, pair);
    const T* kb = qkv + flash_k_at(P, pair / P.qpg);  // the group's K, then V
    const int ntiles = static_cast<int>((min(P.s, i0 + kRows90) - 1) / kKeys90 + 1);
    load_tile<HN>(qs, qb, i0, P.s, P.ldq);

    // Accumulator register i of this thread: row 16 warp + g + 8 ((i / 2) % 2), column
    // 8 (i / 4) + 2 q + i % 2 (wgmma_sm90.cuh); rr below is (i / 2) % 2.
    float o[HN / 2];
#pragma unroll
    for (int i = 0; i < HN / 2; ++i) o[i] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // raw row max, this lane's share of the sum
    const float sl2 = P.scale * kLog2e90;
    for (int it = 0; it < ntiles; ++it) {
        const std::int64_t j0 = static_cast<std::int64_t>(it) * kKeys90;
        __syncthreads();  // the previous tile's products are done with K and V
        load_tile<HN>(ks, kb, j0, P.s, P.ldq);
        load_tile<HN>(vs, kb + HN, j0, P.s, P.ldq);  // read N-major: the same bytes
        w::fence_proxy_async_shared();  // generic-proxy stores, read by wgmma's async proxy
        __syncthreads();
        float sc[kKeys90 / 2];
        w::fence();
#pragma unroll
        for (int step = 0; step < HN / 16; ++step)
            w::mma_ss<kKeys90, T>(sc, kmajor_desc<HN>(qs, step), kmajor_desc<HN>(ks, step), step > 0);
        w::commit_group();
        w::wait_group<0>();
        w::fence_operand(sc);
        // Online softmax per row. Keys past a row (j > i) are masked, only on the diagonal
        // tile (j0 == i0); keys past the sequence only meet rows past it, never written.
        const bool diagonal = j0 + kKeys90 - 1 > i0;
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
            const std::int64_t i = i0 + warp * 16 + rr * 8 + g;
            const float mx = masked_row_max<kKeys90>(sc, rr, diagonal, j0, i, q, m[rr]);  // finite: key 0 of the first tile is in every row
            const float base = mx * sl2;
            const float alpha = exp2f(m[rr] * sl2 - base);  // 0 on the first tile
            m[rr] = mx;
            float sum = 0.0f;
#pragma unroll
            for (int c = 0; c < kKeys90 / 8; ++c)
#pragma unroll
                for (int cc = 0; cc < 2; ++cc) {
                    float& v = sc[4 * c + 2 * rr + cc];
                    v = exp2f(v * sl2 - base);  // 0 where masked
                    sum += v;
                }
            l[rr] = l[rr] * alpha + sum;
#pragma unroll
            for (int c = 0; c < HN / 8; ++c) {
                o[4 * c + 2 * rr] *= alpha;
                o[4 * c + 2 * rr + 1] *= alpha;
            }
        }
        std::uint32_t p[kKeys90 / 16][4];
#pragma unroll
        for (int step = 0; step < kKeys90 / 16; ++step) w::accumulators_to_a<T>(sc, step, p[step]);
        w::fence();  // o and p were written by this thread since the last mma_async
#pragma unroll
        for (int step = 0; step < kKeys90 / 16; ++step)
            w::mma_rs<HN, T, true>(o, p[step], nmajor_desc<HN>(vs, step), true);
        w::commit_group();
        w::wait_group<0>();
        w::fence_operand(o);
#pragma unroll
        for (int step = 0; step < kKeys90 / 16; ++step) w::fence_operand(p[step]);
    }
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
        const float sum = quad_sum(l[rr]);
        const std::int64_t i = i0 + warp * 16 + rr * 8 + g;
        if (i >= P.s) continue;
        const float inv = 1.0f / sum;
        T* orow = out + i * P.ldo + pair * HN + 2 * q;
#pragma unroll
        for (int c = 0; c < HN / 8; ++c)
            *reinterpret_cast<std::uint32_t*>(orow + 8 * c) = pack2<T>(o[4 * c + 2 * rr] * inv, o[4 * c + 2 * rr + 1] * inv);
        if (q == 0) lse[pair * P.s + i] = m[rr] * P.scale + logf(sum);
    }
}

template <int HN, typename T>
void launch90(const FlashParams& P, const void* qkv, void* out, float* lse, cudaStream_t st) {
    auto* k = flash_fwd_sm90<HN, T>;
    GPT_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem90<HN>),
                   "cudaFuncSetAttribute(flash_fwd_sm90)");
    const dim3 grid(static_cast<unsigned>((P.s + kRows90 - 1) / kRows90), static_cast<unsigned>(P.pairs));
    k<<<grid, kThreads90, kSmem90<HN>, st>>>(P, static_cast<const T*>(qkv), static_cast<T*>(out), lse);
}

}  // namespace

bool flash_sm90_supports(const FlashParams& P, DType t) {
    // No document masking here (the sm80 forward has it).
    return (P.hn == 64 || P.hn == 128) && (t == DType::F16 || t == DType::BF16) && !P.drop && P.doc_start == nullptr;
}

void flash_forward_sm90(const FlashParams& P, DType t, const void* qkv, void* out, float* lse, cudaStream_t st) {
    GPT_REQUIRE(flash_sm90_supports(P, t), InternalError, "flash_forward_sm90: unsupported case (hn ", P.hn, ")");
    const bool bf = t == DType::BF16;
    if (P.hn == 64)
        bf ? launch90<64, __nv_bfloat16>(P, qkv, out, lse, st) : launch90<64, __half>(P, qkv, out, lse, st);
    else
        bf ? launch90<128, __nv_bfloat16>(P, qkv, out, lse, st) : launch90<128, __half>(P, qkv, out, lse, st);
}

}  // namespace gpt::cuda
