// Causal flash attention forward for Hopper (sm_90a), warp-specialised after FlashAttention-3
// (Shah et al. 2024): the fast sibling of attention_flash_sm90.cu (GPT_CUDA_FLASH=sm90-basic),
// selected by GPT_CUDA_FLASH=sm90.
//  - Three warpgroups per block and 128 query rows: warpgroup 0 is the producer, of which
//    one thread issues every load by TMA (tma_sm90.cuh); warpgroups 1 and 2 are consumers,
//    64 rows each, sharing each K/V tile, so a tile loaded once feeds 128 rows.
//  - K and V go through a two-stage ring: per stage a "K full" and a "V full" mbarrier (the
//    producer's expect_tx arrival plus the TMA bytes; separate so that S = Q K^T starts
//    before V lands) and an "empty" mbarrier the 256 consumer threads arrive on once their
//    P V product has read the stage. The producer refills a stage only after its empty phase
//    completes, so tile j + 1's loads run under tile j's math.
//  - setmaxnreg: the producer drops to 24 registers, the consumers rise to 240 (24 * 128 +
//    240 * 256 = 64512 of the SM's 65536), headroom over what S (128 keys: 64 registers),
//    P (32), O (HN / 2) and the softmax need: ptxas (CUDA 13, sm_90a) fits every variant in
//    the 168 of __launch_bounds__(384, 1) without spills (the kDrop variants too).
//  - Tiles are TMA boxes with the 128-byte swizzle (head dims 64, 128) or the 64-byte one
//    (96: a 128-byte atom is 64 elements, and 96 columns would end inside one), laid out as
//    the swizzled canonical layouts of wgmma_sm90.cuh: Q and K K-major, V N-major. Rows past
//    the sequence arrive as zeros (TMA's out-of-bounds fill).
//  - Math per consumer as in the basic kernel: S in registers, online softmax with four
//    lanes per row, P rounded to 16 bits as the A registers of O += P V (mma_rs).
//  - Intra-warpgroup overlap (FA3): tile j + 1's S = Q K^T is issued together with tile j's
//    O += P V, and tile j + 1's softmax runs while that P V is on the tensor cores (two
//    register sets: S of the newer tile, P of the older); O is rescaled once P V is done.
//  - Ping-pong (FA3): the two consumers take turns issuing their products, ordered by two
//    named barriers, so one warpgroup's softmax runs while the other's GEMMs occupy the
//    tensor cores.
//  - Attention dropout (kDrop, its own instantiation: the Philox draws cost registers the
//    no-dropout kernel should not pay for): as sm80's forward, l sums the undropped
//    probabilities and O accumulates the dropped ones (P * dropout_mult, 0 or 1 / (1 - p)),
//    so O / l is the dropped attention and lse the undropped softmax's, which the backwards
//    expect. The mask is dropout_mult's Philox index (pair, query, key): every kernel, and
//    the CPU, drops the same elements.
//  - Head dims 64, 96, 128; fp16/bf16.
// Output contract of flash_fwd_sm80: O / l in [s, pairs, hn], lse = m * scale + log(l) with m
// the raw row max, so the sm80 backward consumes them.
#include <cmath>
#include <type_traits>

#include "backend/cuda/attention_flash_params.cuh"
#include "backend/cuda/attention_sm90_rows.cuh"
#include "backend/cuda/tma_sm90.cuh"
#include "backend/cuda/warp_specialization.cuh"
#include "backend/cuda/wgmma_sm90.cuh"

namespace gpt::cuda {

namespace {

namespace w = wgmma;

constexpr int kThreadsWs = 384;  // producer warpgroup + two consumer warpgroups
constexpr int kRowsWs = 128;     // query rows per block, 64 per consumer (wgmma's M)
constexpr int kStagesWs = 2;     // K/V ring depth
constexpr int kConsumerThreads = 256;
constexpr int kProducerRegs = 24, kConsumerRegs = 240;
// Named barriers 1 and 2 (0 is __syncthreads'): consumer c's turn to issue its products
// comes when barrier 1 + c completes (its 128 threads syncing, the other consumer's 128
// arriving).
constexpr int kTurnBarrier = 1;
constexpr float kLog2eWs = 1.4426950408889634f;

// Swizzle span (bytes) and atom width (elements) of a head dim's tiles: 128-byte atoms where
// HN is a multiple of 64 elements, else 64-byte ones (96 = 3 x 32).
template <int HN>
constexpr int kSw = HN % 64 == 0 ? 128 : 64;
template <int HN>
constexpr int kAw = kSw<HN> / 2;
template <int HN>
constexpr int kAtoms = HN / kAw<HN>;
// Keys per K/V tile: 128, the N of S = Q K^T (64 accumulator registers), for every head
// dim (no spills at 128, see above; shared memory 81, 121 and 161 KiB at 64, 96, 128).
template <int HN>
constexpr int kKeysWs = 128;

template <int HN>
constexpr int kQTile = 64 * HN * 2;  // one consumer's Q rows
template <int HN>
constexpr int kKvTile = kKeysWs<HN> * HN * 2;  // one stage of K (or V)
// Shared memory: Q (two consumers), K and V stages, then the mbarriers: q_full, k_full[2],
// v_full[2], empty[2]; 1024 bytes of slack to align the start (swizzled tiles need it).
template <int HN>
constexpr int kBarOffset = 2 * kQTile<HN> + 2 * kStagesWs * kKvTile<HN>;
template <int HN>
constexpr int kSmemWs = kBarOffset<HN> + (1 + 3 * kStagesWs) * 8 + 1024;

template <int HN>
constexpr w::Swizzle kSwMode = kSw<HN> == 128 ? w::Swizzle::B128 : w::Swizzle::B64;

// K step `step` (16 deep) of a K-major swizzled tile of `rows` rows: atom k0 / kAw (each
// rows x kSw bytes, written by one TMA box), then k0 % kAw elements into its rows; SBO is an
// 8-row group of the atom, LBO unused for swizzled K-major.
template <int HN>
__device__ __forceinline__ std::uint64_t kmajor_desc_ws(const unsigned char* tile, int rows, int step) {
    const int k0 = 16 * step;
    return w::make_desc(tile + k0 / kAw<HN> * rows * kSw<HN> + k0 % kAw<HN> * 2, 16, 8 * kSw<HN>, kSwMode<HN>);
}
// K step `step` (16 keys) of the N-major V tile: 16 key rows further; LBO is the distance
// between atoms along N (one box of all the tile's keys), SBO an 8-key group.
template <int HN>
__device__ __forceinline__ std::uint64_t nmajor_desc_ws(const unsigned char* tile, int step) {
    return w::make_desc(tile + step * 16 * kSw<HN>, kKeysWs<HN> * kSw<HN>, 8 * kSw<HN>, kSwMode<HN>);
}

// A tile of `rows` rows from row `row` and column `col` of the map's matrix: kAtoms boxes of
// rows x kAw elements side by side (each its own swizzle atom column).
template <int HN>
__device__ __forceinline__ void load_tile_ws(unsigned char* tile, const tma::TensorMap* map, std::uint64_t* bar,
                                             int rows, std::int64_t col, std::int64_t row) {
#pragma unroll
    for (int a = 0; a < kAtoms<HN>; ++a)
        tma::load_2d(tile + a * rows * kSw<HN>, map, bar, static_cast<int>(col + a * kAw<HN>), static_cast<int>(row));
}


// qmap: qkv as an s x ldq matrix in boxes of 64 rows x kAw; kvmap: the same in boxes of
// kKeysWs rows.
template <int HN, bool kDrop, typename T>
__global__ void __launch_bounds__(kThreadsWs, 1)
    flash_fwd_sm90_ws(FlashParams P, T* out, float* lse, const GPT_GRID_CONSTANT tma::TensorMap qmap,
                      const GPT_GRID_CONSTANT tma::TensorMap kvmap) {
    constexpr int kKeys = kKeysWs<HN>;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char* smem = smem_raw + (1024 - w::smem_address(smem_raw) % 1024) % 1024;
    unsigned char* qs = smem;
    unsigned char* ks = smem + 2 * kQTile<HN>;
    unsigned char* vs = ks + kStagesWs * kKvTile<HN>;
    auto* bars = reinterpret_cast<std::uint64_t*>(smem + kBarOffset<HN>);
    std::uint64_t* q_full = bars;
    std::uint64_t* k_full = bars + 1;
    std::uint64_t* v_full = bars + 1 + kStagesWs;
    std::uint64_t* empty = bars + 1 + 2 * kStagesWs;

    const int wg = threadIdx.x / 128;
    const std::int64_t pair = blockIdx.y;
    const std::int64_t i0 = static_cast<std::int64_t>(gridDim.x - 1 - blockIdx.x) * kRowsWs;  // diagonal-heavy first
    // Causal: keys up to the block's last row (or the sequence's end).
    const int ntiles = static_cast<int>((min(P.s, i0 + kRowsWs) - 1) / kKeys + 1);

    if (threadIdx.x == 0) {
        tma::mbarrier_init(q_full, 1);
        for (int st = 0; st < kStagesWs; ++st) {
            tma::mbarrier_init(&k_full[st], 1);
            tma::mbarrier_init(&v_full[st], 1);
            tma::mbarrier_init(&empty[st], kConsumerThreads);
        }
        tma::fence_mbarrier_init();
    }
    __syncthreads();

    if (wg == 0) {
        // Producer: one thread issues everything; the warpgroup's registers go to the consumers.
        setmaxnreg<kProducerRegs, false>();
        if (threadIdx.x != 0) return;
        const std::int64_t qcol = flash_q_at(P, pair), kcol = flash_k_at(P, pair / P.qpg);
        tma::mbarrier_arrive_expect_tx(q_full, 2 * kQTile<HN>);
        load_tile_ws<HN>(qs, &qmap, q_full, 64, qcol, i0);
        load_tile_ws<HN>(qs + kQTile<HN>, &qmap, q_full, 64, qcol, i0 + 64);
        for (int it = 0; it < ntiles; ++it) {
            const int st = it % kStagesWs;
            // The stage's previous tile (it - kStagesWs) must be released by both consumers:
            // its use number it / kStagesWs - 1 completes that phase of `empty`.
            if (it >= kStagesWs) tma::mbarrier_wait(&empty[st], (it / kStagesWs - 1) & 1);
            const std::int64_t j0 = static_cast<std::int64_t>(it) * kKeys;
            tma::mbarrier_arrive_expect_tx(&k_full[st], kKvTile<HN>);
            load_tile_ws<HN>(ks + st * kKvTile<HN>, &kvmap, &k_full[st], kKeys, kcol, j0);
            tma::mbarrier_arrive_expect_tx(&v_full[st], kKvTile<HN>);
            load_tile_ws<HN>(vs + st * kKvTile<HN>, &kvmap, &v_full[st], kKeys, kcol + HN, j0);
        }
        return;
    }

    // Consumers: warpgroup c (0 or 1) owns rows i0 + 64 c ... + 63.
    setmaxnreg<kConsumerRegs, true>();
    const int c = wg - 1, t = threadIdx.x % 128, warp = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
    const std::int64_t r0 = i0 + 64 * c;
    const unsigned char* qt = qs + c * kQTile<HN>;

    // Accumulator register i of this thread: row 16 warp + g + 8 ((i / 2) % 2), column
    // 8 (i / 4) + 2 q + i % 2 (wgmma_sm90.cuh); rr below is (i / 2) % 2.
    float o[HN / 2];
#pragma unroll
    for (int i = 0; i < HN / 2; ++i) o[i] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // raw row max, this lane's share of the sum
    float alpha[2];
    const float sl2 = P.scale * kLog2eWs;
    float sc[kKeys / 2];                // S of the tile being softmaxed
    std::uint32_t p[kKeys / 16][4];     // P of the tile whose P V is (about to be) in flight

    // The mbarrier waits come before the wgmma.fence that precedes the issues: a spin loop
    // between an mma_async and the next makes ptxas guard the in-flight accumulators by
    // serialising (its C7519 "warpgroup.arrive is injected").
    auto wait_k = [&](int it) { tma::mbarrier_wait(&k_full[it % kStagesWs], (it / kStagesWs) & 1); };
    auto wait_v = [&](int it) { tma::mbarrier_wait(&v_full[it % kStagesWs], (it / kStagesWs) & 1); };
    // S = Q K^T of tile `it` issued (one commit group); the caller waits for it.
    auto issue_s = [&](int it) {
        const int st = it % kStagesWs;
        const unsigned char* kt = ks + st * kKvTile<HN>;
#pragma unroll
        for (int step = 0; step < HN / 16; ++step)
            w::mma_ss<kKeys, T>(sc, kmajor_desc_ws<HN>(qt, 64, step), kmajor_desc_ws<HN>(kt, kKeys, step), step > 0);
        w::commit_group();
    };
    // O += P V of tile `it` issued (one commit group), P from p.
    auto issue_pv = [&](int it) {
        const int st = it % kStagesWs;
        const unsigned char* vt = vs + st * kKvTile<HN>;
#pragma unroll
        for (int step = 0; step < kKeys / 16; ++step)
            w::mma_rs<HN, T, true>(o, p[step], nmajor_desc_ws<HN>(vt, step), true);
        w::commit_group();
    };
    // Online softmax of tile `it`'s S in sc, per row: masks keys past the row (j > i) where the
    // tile reaches past this warpgroup's first row (keys past the sequence only meet rows past
    // it, never written, or are masked as j > i), updates m and l, leaves exp(S - m) in sc
    // and the factor the older O must be scaled by in alpha. O itself is not touched: its P V may
    // still be in flight.
    auto softmax = [&](int it) {
        const std::int64_t j0 = static_cast<std::int64_t>(it) * kKeys;
        const bool diagonal = j0 + kKeys - 1 > r0;
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
            const std::int64_t i = r0 + warp * 16 + rr * 8 + g;
            const float mx = sm90rows::masked_row_max<kKeys>(sc, rr, diagonal, j0, i, q, m[rr]);  // finite: key 0 of the first tile is in every row
            const float base = mx * sl2;
            alpha[rr] = exp2f(m[rr] * sl2 - base);  // 0 on the first tile
            m[rr] = mx;
            float sum = 0.0f;
#pragma unroll
            for (int cc8 = 0; cc8 < kKeys / 8; ++cc8)
#pragma unroll
                for (int cc = 0; cc < 2; ++cc) {
                    float& v = sc[4 * cc8 + 2 * rr + cc];
                    v = exp2f(v * sl2 - base);  // 0 where masked
                    sum += v;
                }
            l[rr] = l[rr] * alpha[rr] + sum;
        }
    };
    auto rescale_o = [&] {
#pragma unroll
        for (int cc8 = 0; cc8 < HN / 8; ++cc8)
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) {
                o[4 * cc8 + 2 * rr] *= alpha[rr];
                o[4 * cc8 + 2 * rr + 1] *= alpha[rr];
            }
    };
    // Ping-pong: this warpgroup waits for its turn before issuing and hands the turn to the
    // other consumer after. Each consumer issues ntiles + 1 times (the first S alone, S with
    // the previous P V, the last P V alone); consumer 1 passes the turn once up front and not
    // after its last issue, so every barrier phase gets exactly its 256 threads.
    // (Constant ids in each branch: with an id in a register ptxas reserves all 16 barriers.)
    auto turn_wait = [&] {
        if (c == 0) named_barrier_sync(kTurnBarrier, kConsumerThreads);
        else named_barrier_sync(kTurnBarrier + 1, kConsumerThreads);
    };
    auto turn_pass = [&] {
        if (c == 0) named_barrier_arrive(kTurnBarrier + 1, kConsumerThreads);
        else named_barrier_arrive(kTurnBarrier, kConsumerThreads);
    };
    // P of tile `it` from sc into p, the A registers of its P V. With kDrop each probability
    // takes its dropout multiplier here (l already holds the undropped sum), not in softmax:
    // there the older P is still live under its P V and the Philox draws would spill (ptxas,
    // sm_90a, 168 registers); here that P is dead and sc shrinks as p fills.
    auto s_to_p = [&](int it) {
        const std::int64_t j0 = static_cast<std::int64_t>(it) * kKeys;
#pragma unroll
        for (int step = 0; step < kKeys / 16; ++step) {
            if constexpr (kDrop) {
                // Keys 2q and 2q + 1 of a row: one Philox block for both (dropout_mult_pair).
#pragma unroll
                for (int cc8 = 2 * step; cc8 < 2 * step + 2; ++cc8)
#pragma unroll
                    for (int rr = 0; rr < 2; ++rr) {
                        float m0, m1;
                        dropout_mult_pair(P, pair, r0 + warp * 16 + rr * 8 + g, j0 + 8 * cc8 + 2 * q, m0, m1);
                        sc[4 * cc8 + 2 * rr] *= m0;
                        sc[4 * cc8 + 2 * rr + 1] *= m1;
                    }
            }
            w::accumulators_to_a<T>(sc, step, p[step]);
        }
    };

    // Intra-warpgroup overlap (FA3): tile it's S = Q K^T is issued before tile it - 1's
    // O += P V, and its softmax runs while that P V is on the tensor cores; two register
    // sets (sc for the newer S, p for the older P) make that possible. The stage of tile
    // it - 1 is released once its P V is complete.
    if (c == 1) turn_pass();  // consumer 0 goes first
    tma::mbarrier_wait(q_full, 0);
    wait_k(0);
    turn_wait();
    w::fence();
    issue_s(0);
    turn_pass();
    w::wait_group<0>();
    w::fence_operand(sc);
    softmax(0);
    rescale_o();
    s_to_p(0);
    for (int it = 1; it < ntiles; ++it) {
        wait_k(it);
        wait_v(it - 1);
        turn_wait();
        w::fence();  // o and p were written by this thread since the last mma_async
        issue_s(it);
        issue_pv(it - 1);
        turn_pass();
        w::wait_group<1>();  // S of tile it (the older group) is done; P V may still run
        w::fence_operand(sc);
        softmax(it);
        w::wait_group<0>();
        w::fence_operand(o);
#pragma unroll
        for (int step = 0; step < kKeys / 16; ++step) w::fence_operand(p[step]);
        // This thread's products are done with tile it - 1's K and V: release its stage.
        tma::mbarrier_arrive(&empty[(it - 1) % kStagesWs]);
        rescale_o();
        s_to_p(it);
    }
    wait_v(ntiles - 1);
    turn_wait();
    w::fence();
    issue_pv(ntiles - 1);
    if (c == 0) turn_pass();
    w::wait_group<0>();
    w::fence_operand(o);
#pragma unroll
    for (int step = 0; step < kKeys / 16; ++step) w::fence_operand(p[step]);
    tma::mbarrier_arrive(&empty[(ntiles - 1) % kStagesWs]);
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
        const float sum = sm90rows::quad_sum(l[rr]);
        const std::int64_t i = r0 + warp * 16 + rr * 8 + g;
        if (i >= P.s) continue;
        const float inv = 1.0f / sum;
        T* orow = out + i * P.ldo + pair * HN + 2 * q;
#pragma unroll
        for (int cc8 = 0; cc8 < HN / 8; ++cc8)
            *reinterpret_cast<std::uint32_t*>(orow + 8 * cc8) =
                pack2<T>(o[4 * cc8 + 2 * rr] * inv, o[4 * cc8 + 2 * rr + 1] * inv);
        if (q == 0) lse[pair * P.s + i] = m[rr] * P.scale + logf(sum);
    }
}

template <int HN, bool kDrop, typename T>
void launch_ws(const FlashParams& P, const void* qkv, void* out, float* lse, cudaStream_t st) {
    // qkv as one s x ldq matrix of 16-bit elements: every pair's Q, K and V are column
    // ranges of it (flash_q_at, flash_k_at), so two maps serve every pair of the grid.
    tma::TensorMap qmap{}, kvmap{};
    const auto rows = static_cast<std::uint64_t>(P.s), cols = static_cast<std::uint64_t>(P.ldq);
    GPT_CUDA_CHECK(tma::make_tensor_map_2d(&qmap, qkv, rows, cols, cols * 2, 64, kAw<HN>, kSw<HN>),
                   "make_tensor_map_2d(flash_fwd_sm90_ws Q)");
    GPT_CUDA_CHECK(tma::make_tensor_map_2d(&kvmap, qkv, rows, cols, cols * 2, kKeysWs<HN>, kAw<HN>, kSw<HN>),
                   "make_tensor_map_2d(flash_fwd_sm90_ws K/V)");
    auto* k = flash_fwd_sm90_ws<HN, kDrop, T>;
    GPT_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemWs<HN>),
                   "cudaFuncSetAttribute(flash_fwd_sm90_ws)");
    const dim3 grid(static_cast<unsigned>((P.s + kRowsWs - 1) / kRowsWs), static_cast<unsigned>(P.pairs));
    k<<<grid, kThreadsWs, kSmemWs<HN>, st>>>(P, static_cast<T*>(out), lse, qmap, kvmap);
}

}  // namespace

bool flash_sm90_ws_supports(const FlashParams& P, DType t) {
    // TMA's column coordinate is a 32-bit int (ldq elements per row).
    // No document masking here (the sm80 forward has it).
    return (P.hn == 64 || P.hn == 96 || P.hn == 128) && (t == DType::F16 || t == DType::BF16) &&
           P.ldq < (std::int64_t{1} << 31) && P.s < (std::int64_t{1} << 31) && P.doc_start == nullptr;
}

void flash_forward_sm90_ws(const FlashParams& P, DType t, const void* qkv, void* out, float* lse, cudaStream_t st) {
    GPT_REQUIRE(flash_sm90_ws_supports(P, t), InternalError, "flash_forward_sm90_ws: unsupported case (hn ", P.hn,
                ")");
    const bool bf = t == DType::BF16;
    auto go = [&](auto hn, auto drop) {
        constexpr int H = decltype(hn)::value;
        constexpr bool D = decltype(drop)::value;
        bf ? launch_ws<H, D, __nv_bfloat16>(P, qkv, out, lse, st) : launch_ws<H, D, __half>(P, qkv, out, lse, st);
    };
    auto with_drop = [&](auto hn) {
        P.drop ? go(hn, std::true_type{}) : go(hn, std::false_type{});
    };
    switch (P.hn) {
        case 64:
            return with_drop(std::integral_constant<int, 64>{});
        case 96:
            return with_drop(std::integral_constant<int, 96>{});
        default:
            return with_drop(std::integral_constant<int, 128>{});
    }
}

}  // namespace gpt::cuda
