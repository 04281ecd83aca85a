// Causal flash attention backward for Hopper (sm_90a) on wgmma (wgmma_sm90.cuh), the ideas
// of FlashAttention-3's backward (Shah et al. 2024) in their simplest form, with the sm80
// backward's contract (attention_flash_sm80.cu): inputs qkv, dout, the forward's lse and
// D = rowsum(dO * O) per query (flash_delta_kernel); dK and dV written into dqkv, dQ summed
// over key blocks into the fp32 scratch dq_acc (by bulk reductions into a tiled layout that
// flash_dq_store_tiled puts in place, or by atomics into the sm80 file's row layout, which
// its flash_dq_store converts).
//  - One warpgroup (128 threads) per block and 64 keys (wgmma's M), walking the 64-query
//    tiles from the diagonal one on (causal) for every query head of the K/V group in head
//    order, so a group's dK/dV is summed in registers in a fixed order, as the sm80 kernel.
//  - S^T = K Q^T and dP^T = V dO^T are m64n64 accumulators (mma_ss: K, V, Q, dO from shared
//    memory, all K-major over the head dim); P^T = exp(S^T scale - lse) per column (query)
//    and dS^T = P^T (dP^T - D) scale are computed on those fragments, rounded to 16 bits, and
//    are the register A operands of dV += P^T dO and dK += dS^T Q (mma_rs), with dO and Q
//    read N-major from the very tiles the first two products read K-major (a canonical
//    no-swizzle tile is both: attention_sm90_tiles.cuh).
//  - dQ = dS K needs dS with queries as rows: dS^T goes to shared memory (16-bit, in the
//    M-major layout, so two adjacent queries are one 32-bit store) and is the A operand of
//    mma_ss with kTransA, K (N-major) its B: the whole head dim at 64 and 96 (one m64n96 at
//    96, gpt22b-shape's head dim), 64-column halves at 128 (32 accumulators a thread, not 64:
//    dK, dV, P^T and dS^T are live then).
//  - Four variants of one template (kPipe, WG, kBulk), the same math:
//    two warpgroups, double-buffered (GPT_CUDA_FLASH=sm90, FlashAttention-3's block shape):
//    256 threads and 128 keys a block, each warpgroup its 64 keys' S^T, dP^T, dK and dV as
//    below, both on the same query tile (its Q, dO, lse, D loaded once for 128 keys, not 64);
//    dS^T of all 128 keys in shared memory, and each warpgroup computes half of dQ's head-dim
//    columns (m64n32 / n48 / n64 at head dims 64 / 96 / 128) over all 128 keys: one set of
//    dQ partials per 128 keys. Every tile's causal test runs (no untested copy of the loop:
//    registers). Each warpgroup's dQ partial (64 queries x its half of the head dim, fp32)
//    goes through a shared-memory stage into the scratch by ONE bulk reduction of the tensor
//    memory accelerator (kBulk; cp.reduce.async.bulk .add.f32, FlashAttention-3's dQ): the
//    warpgroup's 128 threads store 16 bytes each per float4 of accumulators, one thread adds
//    the stage into the tile's contiguous block in L2, where the atomic variant
//    (sm90-dq-atomic, the kernel before) sends 16 (head dim 128) float2 atomics a thread and
//    step. The stage is written again only after that thread's wait for the previous
//    reduction's read (a step later, so it has long finished), told to the warpgroup by a
//    named barrier; the scratch's tile layout (kBulk's comment below) needs s rounded up to
//    64 queries (flash_dq_scratch_floats).
//    One warpgroup, double-buffered (sm90-bwd-1wg): step i + 1's Q and dO tiles (16-byte
//    cp.async into the canonical no-swizzle layout, load_tile_async) and its lse and D
//    (4-byte cp.async, lse raw: times log2(e) where used) are copied into a second buffer
//    while step i computes; one commit group in flight, waited for at the top of the next
//    step, then a fence (cp.async writes through the generic proxy, wgmma reads through the
//    async one) and the step's one barrier, after which the other buffer is free for the next
//    copies (the two-warpgroup variant the same). Rows past the sequence are zero-filled
//    (source size 0). dQ partials go out as float2 atomics (sm_90's vector atomicAdd: two
//    adjacent columns of a row, half the atomic instructions).
//    Unpipelined (GPT_CUDA_FLASH=sm90-bwd-plain, the first kernel): plain 16-byte loads and
//    stores between two barriers each step, scalar atomics. No TMA, no warp specialization.
//    Warp-specialised (kWs, GPT_CUDA_FLASH=sm90-bwd-ws; FlashAttention-3's structure): the
//    two-warpgroup bulk-dQ kernel's consumers behind a producer warpgroup that loads K, V and
//    each step's Q and dO by TMA (unswizzled 64 x 8 boxes: the consumers read those tiles
//    through kmajor_desc_tma / nmajor_desc_tma) and the statistics, into the same two buffers,
//    full and empty mbarriers between them (kWs's comment in the kernel). setmaxnreg: the
//    producer 32 registers, the consumers 240 (32 * 128 + 240 * 256 = 65,536).
//  - Attention dropout (kDrop, its own instantiation) as sm80's backward, on dropout_kept's
//    Philox mask: the keep bits drawn before the tile's products, a 32-bit word of one query's
//    consecutive keys a thread from whole Philox blocks (a quarter of the draws of one per
//    fragment element), read back from shared memory into P^T's sign and carried into dS^T
//    (see the step loop); double-buffered, the draws overlap the step's copies.
// ptxas (CUDA 13, sm_90a), no spills (a build error), registers a thread at head dims 128 / 96 / 64:
// two warpgroups with bulk dQ 242 / 214 / 180, with dropout 247 / 226 / 198; with atomic dQ
// 240 / 212 / 180, with dropout 247 / 224 / 192; one warpgroup 249 / 226 / 184, with dropout
// 243 / 232 / 189; unpipelined 254 / 231 / 193, with dropout 250 / 235 / 193; warp-specialised
// (ptxas reports __launch_bounds__(384)'s 168; the consumers' code after setmaxnreg takes up
// to 240; with the producer at 24 registers the producer spilled, 44 bytes) fits but with
// dropout at head dim 128, where it spilled 16 bytes (the two-warpgroup kernel needs 247
// there; reading the keep bits in the dS^T loop or through a volatile pointer left 4 to 8):
// that case is not built, flash_backward_sm90 runs the two-warpgroup kernel for it. Shared memory
// (kSmemB90): two warpgroups with bulk dQ 183,296 / 142,336 / 101,376 bytes, with atomic dQ
// 150,528 / 117,760 / 84,992, warp-specialised the bulk's and 40 bytes of mbarriers (one block,
// eight warps or twelve, an SM; the bulk variant's named
// barriers, their id a register, make ptxas reserve all 16 barriers, which one block an SM
// does not mind), one warpgroup 109,056 / 84,480 / 59,904, unpipelined 75,776 / 59,392 /
// 43,008. The one-warpgroup kernels run two blocks (eight warps) an SM in every case, set by
// registers (182 a thread is 23,296 a block: three blocks would need more than the SM's
// 65,536); shared memory (228 KiB an SM, 1 KiB reserved a block) would allow
// double-buffered 2 / 2 / 3 blocks, unpipelined 3 / 3 / 5.
#include <cmath>
#include <type_traits>

#include "backend/cuda/attention_flash_params.cuh"
#include "backend/cuda/attention_sm90_tiles.cuh"
#include "backend/cuda/tma_sm90.cuh"
#include "backend/cuda/warp_specialization.cuh"
#include "backend/cuda/wgmma_sm90.cuh"

namespace gpt::cuda {

namespace {

namespace w = wgmma;
using sm90tiles::kmajor_desc;
using sm90tiles::load_tile;
using sm90tiles::nmajor_at;
using sm90tiles::nmajor_desc;

// WG warpgroups a block (1 or 2), each owning 64 keys (wgmma's M for S^T, dP^T, dK, dV).
template <int WG>
constexpr int kThreadsB90 = 128 * WG;  // the consumers (kWs adds a producer warpgroup before them)
template <int WG>
constexpr int kKeysB90 = 64 * WG;  // keys per block
constexpr int kRowsB90 = 64;       // queries per tile (N of S^T, K depth of dK, dV; M of dQ)
// Head-dim columns per dQ product. One warpgroup: the whole head at 64 and 96 (48
// accumulators a thread at 96, within the registers dK and dV leave: 48 each), 64-column
// halves at 128 (32, not 64: dK, dV, P^T and dS^T are live then). Two: each warpgroup one
// half of the head dim (32 / 48 / 64 columns) over all 128 keys of the block.
template <int HN, int WG>
constexpr int kDqN = WG == 2 ? HN / 2 : HN == 128 ? 64 : HN;
constexpr float kLog2eB90 = 1.4426950408889634f;

template <int HN>
constexpr int kTileBytesB90 = 64 * HN * 2;
template <int WG>
constexpr int kDsBytes = kKeysB90<WG> * kRowsB90 * 2;  // dS^T, 16-bit
constexpr int kStatBytes = 2 * kRowsB90 * 4;           // lse (* log2(e) unpipelined) and D of a tile's queries
// kBulk: the block's fp32 dQ partial of a step (64 queries x the head dim), staged for the
// bulk reduction.
template <int HN, bool kBulk>
constexpr int kDqStageBytes = kBulk ? kRowsB90 * HN * 4 : 0;
// K and V (a 64-key tile per warpgroup, K's contiguous: one 128-row tile for dQ's B); Q, dO
// (twice with kPipe: the step's buffer and the next step's, filling); dS^T; the tile
// statistics (twice with kPipe); the dropout keep bits (a word a thread); with kBulk the dQ stage;
// the alignment slack.
// kWs: the mbarriers after the stage (K/V full, the two buffers' full and empty).
template <int HN, bool kPipe, int WG, bool kBulk = false, bool kWs = false>
constexpr int kSmemB90 = (2 * WG + (kPipe ? 4 : 2)) * kTileBytesB90<HN> + kDsBytes<WG> + (kPipe ? 2 : 1) * kStatBytes +
                         kThreadsB90<WG> * 4 + kDqStageBytes<HN, kBulk> + (kWs ? 5 * 8 : 0) + 1024;
static_assert(kSmemB90<128, true, 2, true, true> <= 227 * 1024, "over the opt-in shared memory of a block (227 KiB)");
// kWs: registers of the producer warpgroup (index math and TMA issue; at 24 it spilled 44
// bytes) and of the consumers (32 * 128 + 240 * 256 = the SM's 65,536; 240 is the most the
// consumers can have beside any producer).
constexpr int kProducerRegsB90 = 32, kConsumerRegsB90 = 240;
// kWs: named barrier of the 256 consumer threads (0 is __syncthreads', 1 and 2 the bulk
// stages').
constexpr int kConsumersBarrier = 3;

// kWs: rows [r0, r0 + 64) of columns [col, col + HN) of a tensor map's matrix into a tile in
// TMA's unswizzled layout (attention_sm90_tiles.cuh, kmajor_desc_tma): HN / 8 boxes of 64 rows
// x 8 columns, completing on bar. Rows past the matrix (the sequence) arrive as zeros.
template <int HN>
__device__ __forceinline__ void load_tile_tma(unsigned char* tile, const tma::TensorMap* map, std::uint64_t* bar,
                                              std::int64_t col, std::int64_t r0) {
#pragma unroll
    for (int c = 0; c < HN / 8; ++c)
        tma::load_2d(tile + c * 1024, map, bar, static_cast<int>(col + 8 * c), static_cast<int>(r0));
}

// kBulk's dQ scratch: per (query head, 64-query tile) a block of 64 x HN floats, in two halves
// of HN / 2 columns (one per warpgroup), each in the order of the warpgroup's accumulator
// registers (wgmma_sm90.cuh): float4 number v of thread tt (0..127) at (v * 128 + tt) * 4,
// holding its accumulators 4v .. 4v + 3. So a warpgroup's partial is one contiguous run for
// one bulk reduction, its stores into the stage are 16 bytes a thread with consecutive threads
// side by side (no bank conflicts), and flash_dq_store_tiled puts the sums in place after.
__host__ __device__ constexpr std::int64_t dq_tiles(std::int64_t s) { return (s + kRowsB90 - 1) / kRowsB90; }

// kPipe: the double-buffered variant; without it the unpipelined one
// (GPT_CUDA_FLASH=sm90-bwd-plain), its loads and scalar dQ atomics as before. WG = 2 (kPipe
// only): two warpgroups on 128 keys, WG = 1 one on 64 (sm90-bwd-1wg). kBulk (WG = 2 only):
// dQ partials by one bulk reduction a warpgroup and step (GPT_CUDA_FLASH=sm90), else by
// float2 atomics (sm90-dq-atomic). kWs (WG = 2, kPipe, kBulk: sm90-bwd-ws): the same two
// consumer warpgroups behind a producer warpgroup that loads by TMA (kWs's comment below).
// All share the step's math below.
template <int HN, bool kDrop, bool kPipe, int WG, bool kBulk, bool kWs, typename T>
__global__ void __launch_bounds__(kThreadsB90<WG> + (kWs ? 128 : 0), 1)
    flash_bwd_sm90(FlashParams P, const T* qkv, const T* dout, const float* lse, const float* D, T* dqkv,
                   float* dq_acc, const GPT_GRID_CONSTANT tma::TensorMap qkv_map,
                   const GPT_GRID_CONSTANT tma::TensorMap dout_map) {
    static_assert(!kWs || (WG == 2 && kPipe && kBulk), "the warp-specialised backward is the bulk-dQ kernel's");
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char* ks = smem_raw + (1024 - w::smem_address(smem_raw) % 1024) % 1024;
    unsigned char* vs = ks + WG * kTileBytesB90<HN>;
    unsigned char* qd0 = vs + WG * kTileBytesB90<HN>;  // buffer 0: Q, then dO; with kPipe buffer 1 after it
    unsigned char* dss = qd0 + (kPipe ? 4 : 2) * kTileBytesB90<HN>;  // dS^T: (key, query) at nmajor_at<64>(query, key)
    float* st0 = reinterpret_cast<float*>(dss + kDsBytes<WG>);  // buffer 0's lse, then D; with kPipe buffer 1's after
    std::uint32_t* keeps = reinterpret_cast<std::uint32_t*>(st0 + (kPipe ? 4 : 2) * kRowsB90);  // keep bits, 2 words a query
    constexpr int kThreads = kThreadsB90<WG>;
    static_assert(!kBulk || WG == 2, "the bulk dQ reduction is the two-warpgroup kernel's");
    float* dq_stage = reinterpret_cast<float*>(keeps + kThreads);  // kBulk: 1024-byte aligned (sizes above)
    const std::int64_t kv = blockIdx.y, j0 = static_cast<std::int64_t>(blockIdx.x) * kKeysB90<WG>;
    const int ntiles = static_cast<int>((P.s - j0 + kRowsB90 - 1) / kRowsB90);
    const int nsteps = ntiles * static_cast<int>(P.qpg);
    // Step `step`'s query head and first query: the group's heads in order, each from the
    // diagonal tile on.
    auto pair_of = [&](int step) { return kv * P.qpg + step / ntiles; };
    auto first_of = [&](int step) { return j0 + static_cast<std::int64_t>(step % ntiles) * kRowsB90; };
    // kWs (FlashAttention-3's backward structure): warpgroup 0 is the producer, warpgroups 1
    // and 2 the consumers, which run the two-warpgroup kernel's steps unchanged but for their
    // loads and barriers. The producer's thread 0 loads K and V once (kv_full) and each step's
    // Q and dO tiles by TMA (64 x 8 boxes, unswizzled: the consumers' descriptors are
    // kmajor_desc_tma / nmajor_desc_tma) into the two buffers; its warp 1 copies the step's
    // lse and D (zeros past s) with plain loads and stores, each lane then arriving on the
    // buffer's full barrier (1 + 32 arrivals and the TMA bytes: mbarrier's release and acquire
    // order those stores before the consumers' reads). The consumers arrive on the buffer's
    // empty barrier once their last product reading it is waited for (both of a step's
    // buffers: Q, dO, lse, D), and the producer refills it after that phase, so step i + 1's
    // loads run under step i's math with no consumer issuing a copy or waiting on another's.
    // Block-wide barriers become named barriers of the 256 consumers (the producer leaves
    // early).
    std::uint64_t* bars = reinterpret_cast<std::uint64_t*>(dq_stage + (kBulk ? kRowsB90 * HN : 0));
    std::uint64_t *kv_full = bars, *full = bars + 1, *empty = bars + 3;
    if constexpr (kWs) {
        if (threadIdx.x == 0) {
            tma::mbarrier_init(kv_full, 1);
            for (int b = 0; b < 2; ++b) {
                tma::mbarrier_init(&full[b], 1 + 32);
                tma::mbarrier_init(&empty[b], kThreads);
            }
            tma::fence_mbarrier_init();
        }
        __syncthreads();
        if (threadIdx.x < 128) {
            setmaxnreg<kProducerRegsB90, false>();
            const int pt = threadIdx.x;
            if (pt == 0) {
                tma::mbarrier_arrive_expect_tx(kv_full, 4 * kTileBytesB90<HN>);
                for (int w = 0; w < WG; ++w) {
                    load_tile_tma<HN>(ks + w * kTileBytesB90<HN>, &qkv_map, kv_full, flash_k_at(P, kv), j0 + 64 * w);
                    load_tile_tma<HN>(vs + w * kTileBytesB90<HN>, &qkv_map, kv_full, flash_k_at(P, kv) + HN,
                                      j0 + 64 * w);
                }
            }
            if (pt != 0 && pt / 32 != 1) return;
            for (int it = 0; it < nsteps; ++it) {
                const int b = it % 2;
                // Step it - 2's consumers are done with buffer b: completion it / 2 - 1 of empty[b].
                if (it >= 2) tma::mbarrier_wait(&empty[b], (it / 2 - 1) & 1);
                const std::int64_t pr = pair_of(it), r0 = first_of(it);
                if (pt == 0) {
                    unsigned char* qb = qd0 + b * 2 * kTileBytesB90<HN>;
                    tma::mbarrier_arrive_expect_tx(&full[b], 2 * kTileBytesB90<HN>);
                    load_tile_tma<HN>(qb, &qkv_map, &full[b], flash_q_at(P, pr), r0);
                    load_tile_tma<HN>(qb + kTileBytesB90<HN>, &dout_map, &full[b], pr * HN, r0);
                } else {
                    for (int e = pt % 32; e < 2 * kRowsB90; e += 32) {
                        const std::int64_t r = r0 + e % kRowsB90;
                        st0[b * 2 * kRowsB90 + e] = r < P.s ? (e < kRowsB90 ? lse : D)[pr * P.s + r] : 0.0f;
                    }
                    tma::mbarrier_arrive(&full[b]);
                }
            }
            return;
        }
        setmaxnreg<kConsumerRegsB90, true>();
    }
    // warp: the warp within its warpgroup (its 16 rows of every fragment); the warpgroup's
    // keys start at j0 + 64 wg, its K and V tiles at ksw, vsw.
    // (With one warpgroup both are constants: ptxas then keeps the kernel's old registers.)
    const int t = threadIdx.x - (kWs ? 128 : 0), wg = WG == 1 ? 0 : t / 128, warp = (WG == 1 ? t : t % 128) / 32,
              lane = t % 32, g = lane / 4, q = lane % 4;
    const unsigned char* ksw = ks + wg * kTileBytesB90<HN>;
    const unsigned char* vsw = vs + wg * kTileBytesB90<HN>;
    const T* kb = qkv + flash_k_at(P, kv);
    // The operand descriptors of the tiles' layout: TMA's with kWs, else load_tile's.
    auto kdesc = [](const unsigned char* tile, int step) {
        if constexpr (kWs)
            return sm90tiles::kmajor_desc_tma(tile, step);
        else
            return kmajor_desc<HN>(tile, step);
    };
    auto ndesc = [](const unsigned char* tile, int step) {
        if constexpr (kWs)
            return sm90tiles::nmajor_desc_tma(tile, step);
        else
            return nmajor_desc<HN>(tile, step);
    };
    // Block-wide among the consumers.
    auto consumers_sync = [] {
        if constexpr (kWs)
            named_barrier_sync(kConsumersBarrier, kThreads);
        else
            __syncthreads();
    };
    // kPipe: step `step`'s Q, dO tiles and statistics (raw lse, D; zeros past s) into buffer
    // b by cp.async, committed as one group.
    auto prefetch = [&](int step, int b) {
        const std::int64_t pr = pair_of(step), r0 = first_of(step);
        unsigned char* q = qd0 + b * 2 * kTileBytesB90<HN>;
        sm90tiles::load_tile_async<HN>(q, qkv + flash_q_at(P, pr), r0, P.s, P.ldq);
        sm90tiles::load_tile_async<HN>(q + kTileBytesB90<HN>, dout + pr * HN, r0, P.s, P.ldo);
        for (int e = t; e < 2 * kRowsB90; e += kThreads) {
            const bool valid = r0 + e % kRowsB90 < P.s;
            const float* src = (e < kRowsB90 ? lse : D) + pr * P.s + (valid ? r0 + e % kRowsB90 : 0);
            cp_async_4(st0 + b * 2 * kRowsB90 + e, src, valid);
        }
        cp_async_commit();
    };
    if constexpr (kWs) {
        tma::mbarrier_wait(kv_full, 0);
    } else if constexpr (kPipe) {
#pragma unroll
        for (int w = 0; w < WG; ++w) {
            sm90tiles::load_tile_async<HN>(ks + w * kTileBytesB90<HN>, kb, j0 + 64 * w, P.s, P.ldq);
            sm90tiles::load_tile_async<HN>(vs + w * kTileBytesB90<HN>, kb + HN, j0 + 64 * w, P.s, P.ldq);
        }
        prefetch(0, 0);  // one group with K and V
    } else {
        static_assert(WG == 1, "the unpipelined variant has one warpgroup");
        load_tile<HN>(ks, kb, j0, P.s, P.ldq);
        load_tile<HN>(vs, kb + HN, j0, P.s, P.ldq);
    }

    // Accumulator register i of a 64 x N fragment: row 16 warp + g + 8 ((i / 2) % 2), column
    // 8 (i / 4) + 2 q + i % 2 (wgmma_sm90.cuh). For S^T and dP^T rows are keys, columns queries.
    float dk[HN / 2], dv[HN / 2];
#pragma unroll
    for (int i = 0; i < HN / 2; ++i) dk[i] = dv[i] = 0.0f;
    const float sl2 = P.scale * kLog2eB90;
    for (int it = 0; it < nsteps; ++it) {
        const std::int64_t pair = pair_of(it);
        const std::int64_t i0 = first_of(it);
        // kDrop: the warpgroup's keep bits of this step (its 64 keys x the tile's 64
        // queries), drawn before S^T and dP^T exist, when dK and dV are the only large live
        // arrays (drawn where they are used, the Philox rounds spill at head dims 96, 128), into
        // its 128 words of `keeps`: thread tt draws query tt / 2's keys 32 (tt % 2) .. + 31, the
        // word's consecutive indices, from whole Philox blocks (8; 9 where the first index is
        // not a multiple of 4), where one draw per element of the thread's own fragment (keys g
        // and g + 8 lie in different blocks) took 32: a quarter of the Philox rounds. The
        // fragment's bits are read back where P^T is formed, after the step's barrier; the words
        // are rewritten only after the previous step's dS^T barrier, past which no thread reads
        // them. A dropped element of P^T gets its sign flipped (P >= 0, so the sign is free to
        // carry the bit); the dS^T loop below reads it back from the sign. With kPipe the draws
        // overlap this step's copies, still in flight.
        if constexpr (kDrop) {
            const int tt = t % 128;  // query tt / 2, keys half tt % 2
            keeps[128 * wg + tt] = dropout_keep_bits<32>(P, pair, i0 + tt / 2, j0 + 64 * wg + 32 * (tt % 2));
        }
        const int buf = kPipe ? it % 2 : 0;
        unsigned char* qs = qd0 + buf * 2 * kTileBytesB90<HN>;
        unsigned char* dos = qs + kTileBytesB90<HN>;
        const float* ls = st0 + buf * 2 * kRowsB90;  // lse per query of the tile (* log2(e) unpipelined)
        const float* dl = ls + kRowsB90;             // D per query of the tile
        if constexpr (kWs) {
            tma::mbarrier_wait(&full[buf], (it / 2) & 1);  // completion it / 2 of the buffer's
        } else if constexpr (kPipe) {
            // This step's copies were issued a whole step ago (the prologue for step 0): the
            // only group in flight. Then the fence for wgmma's async-proxy reads, and the
            // barrier: every thread's copies landed, and every thread is past the previous
            // step's products (all waited for), so the other buffer (the previous step's Q, dO,
            // statistics) and dS^T are free: the next step's copies go there now and land
            // while this step computes.
            cp_async_wait<0>();
            w::fence_proxy_async_shared();
            __syncthreads();
            if (it + 1 < nsteps) prefetch(it + 1, buf ^ 1);
        } else {
            __syncthreads();  // the previous step's products (all waited for) are done with Q, dO, dS^T
            load_tile<HN>(qs, qkv + flash_q_at(P, pair), i0, P.s, P.ldq);
            load_tile<HN>(dos, dout + pair * HN, i0, P.s, P.ldo);
            for (int e = t; e < kRowsB90; e += kThreads) {
                const bool valid = i0 + e < P.s;
                st0[e] = valid ? lse[pair * P.s + i0 + e] * kLog2eB90 : 0.0f;
                st0[kRowsB90 + e] = valid ? D[pair * P.s + i0 + e] : 0.0f;
            }
            w::fence_proxy_async_shared();  // generic-proxy stores, read by wgmma's async proxy
            __syncthreads();
        }

        float st[kRowsB90 / 2], dp[kRowsB90 / 2];  // S^T, dP^T: 64 keys x 64 queries
        w::fence();
#pragma unroll
        for (int step = 0; step < HN / 16; ++step)
            w::mma_ss<kRowsB90, T>(st, kdesc(ksw, step), kdesc(qs, step), step > 0);
        w::commit_group();
#pragma unroll
        for (int step = 0; step < HN / 16; ++step)
            w::mma_ss<kRowsB90, T>(dp, kdesc(vsw, step), kdesc(dos, step), step > 0);
        w::commit_group();
        w::wait_group<1>();  // S^T landed; dP^T may still be under way
        w::fence_operand(st);
        // P^T in place. Query i sees key j when j <= i < s: only the warpgroup's diagonal tile
        // (i0 == j0 + kw), with two warpgroups the second one's tile before it (i0 == j0: all
        // its keys after all the queries), and a tile reaching past s need the test; keys past
        // s only meet queries past it. Element i is (query i0 + iq, key j0 + kw + 16 warp + g +
        // kk) with iq = 2q + c, c = 8 (i / 4) + i % 2 and kk = 8 ((i / 2) % 2) compile-time
        // constants: it is kept when c - kk >= lo and c < hi, two 32-bit thresholds of the
        // thread and step compared with immediates (a tile is less than s < 2^31 keys away).
        // Two warpgroups test every tile: with the branch between a tested and an untested
        // copy of the loop ptxas spilled the two-warpgroup kernel at head dim 128 (20 bytes;
        // 240 registers without it), for two compares and a select an element.
        const int kw = 64 * wg;  // the warpgroup's first key from j0
        const int qoff = static_cast<int>(i0 - j0) - kw, qend = static_cast<int>(P.s - j0) - kw;
        const bool edge = WG == 2 || qoff <= 0 || qoff + kRowsB90 > qend;
        const int lo = 16 * warp + g - qoff - 2 * q, hi = qend - qoff - 2 * q;
        // kDrop: this thread's keep words (query 2q's, then +2 per column offset) and bit.
        const std::uint32_t* kbits = keeps + 128 * wg + 4 * q + warp / 2;
        const int kshift = 16 * (warp % 2) + g;
#pragma unroll
        for (int i = 0; i < kRowsB90 / 2; ++i) {
            const int iq = 8 * (i / 4) + 2 * q + i % 2;
            const int c = 8 * (i / 4) + i % 2, kk = 8 * ((i / 2) % 2);
            // kPipe copies the raw lse (cp.async cannot scale): times log2(e) here.
            const float p = exp2f(st[i] * sl2 - (kPipe ? ls[iq] * kLog2eB90 : ls[iq]));
            st[i] = !edge || (c - kk >= lo && c < hi) ? p : 0.0f;
            if constexpr (kDrop) {
                // Key 16 warp + g + kk of the warpgroup's 64 (g + kk < 16): bit 16 (warp % 2) +
                // g + kk of word warp / 2 of query iq (2q + a compile-time offset).
                if (!(kbits[2 * (iq - 2 * q)] >> (kshift + kk) & 1u)) st[i] = -st[i];  // dropped: -P (-0 where P is 0)
            }
        }
        w::wait_group<0>();
        w::fence_operand(dp);
        // dS^T = P^T (dP^T - D) scale; the softmax scale of dK and dQ is in it, as in sm80's.
        // With dropout (kDrop) as sm80's backward: with M the multiplier (0 or 1 / (1 - p)),
        // dV takes the dropped P^T M and dS^T = P^T (dP^T M - D) scale (D = rowsum(dO O) of
        // the dropped O); M from P^T's sign (set above from the keep bits).
#pragma unroll
        for (int i = 0; i < kRowsB90 / 2; ++i) {
            const int iq = 8 * (i / 4) + 2 * q + i % 2;
            if constexpr (kDrop) {
                const float mult = __float_as_uint(st[i]) >> 31 ? 0.0f : P.keep_scale, p = fabsf(st[i]);
                dp[i] = p * (dp[i] * mult - dl[iq]) * P.scale;
                st[i] = p * mult;
            } else {
                dp[i] = st[i] * (dp[i] - dl[iq]) * P.scale;
            }
        }
        // kWs: no block-wide barrier opened the step; this one tells that both warpgroups
        // are past the previous step's dQ products, the readers of dS^T.
        if constexpr (kWs) consumers_sync();
        std::uint32_t pa[kRowsB90 / 16][4], da[kRowsB90 / 16][4];
#pragma unroll
        for (int step = 0; step < kRowsB90 / 16; ++step) {
            w::accumulators_to_a<T>(st, step, pa[step]);
            w::accumulators_to_a<T>(dp, step, da[step]);
            // dS^T to shared memory, the same rounded values dK takes: a[0] is (key g, queries
            // 16 step + 2q, +1), a[1] key g + 8, a[2] and a[3] queries + 8 (wgmma_sm90.cuh).
            const int kr = 64 * wg + 16 * warp + g, qc = 16 * step + 2 * q;
            *reinterpret_cast<std::uint32_t*>(dss + nmajor_at<kRowsB90>(qc, kr)) = da[step][0];
            *reinterpret_cast<std::uint32_t*>(dss + nmajor_at<kRowsB90>(qc, kr + 8)) = da[step][1];
            *reinterpret_cast<std::uint32_t*>(dss + nmajor_at<kRowsB90>(qc + 8, kr)) = da[step][2];
            *reinterpret_cast<std::uint32_t*>(dss + nmajor_at<kRowsB90>(qc + 8, kr + 8)) = da[step][3];
        }
        // dV += P^T dO and dK += dS^T Q over the tile's queries (k), dO and Q N-major.
        w::fence();  // dk, dv, pa, da were written by this thread since the last mma_async
#pragma unroll
        for (int step = 0; step < kRowsB90 / 16; ++step)
            w::mma_rs<HN, T, true>(dv, pa[step], ndesc(dos, step), true);
#pragma unroll
        for (int step = 0; step < kRowsB90 / 16; ++step)
            w::mma_rs<HN, T, true>(dk, da[step], ndesc(qs, step), true);
        w::commit_group();
        w::fence_proxy_async_shared();  // the dS^T stores, read next by wgmma
        consumers_sync();               // every warp's dS^T rows are in place (both warpgroups')
        // dQ (64 queries x kDqN columns of the head dim) += dS K over the block's keys: A = dS
        // M-major (dS^T as stored), B = K N-major, its columns n0.. at n0 * 16 bytes on (the
        // two warpgroups' K tiles are one 128-key tile: 16 keys a k step, 2 row groups). With
        // two warpgroups each takes its half of the columns: the block's dQ partial is then
        // one set of atomics per 128 keys, not per 64.
        // (A constant trip count: the loop unrolls, and pa, da die after its first product.)
        constexpr int kDqCols = kDqN<HN, WG>, kDqProducts = WG == 2 ? 1 : HN / kDqCols;
#pragma unroll
        for (int h = 0; h < kDqProducts; ++h) {
            const int n0 = (WG == 2 ? wg : h) * kDqCols;
            float dq[kDqCols / 2];
            w::fence();
#pragma unroll
            for (int step = 0; step < kKeysB90<WG> / 16; ++step) {
                // K's 16 keys of the step: with kWs in the tile of its 64 (tiles are not one
                // 128-key block there), n0 at n0 / 8 boxes on.
                const std::uint64_t kd = kWs ? sm90tiles::nmajor_desc_tma(ks + step / 4 * kTileBytesB90<HN> + n0 * 128, step % 4)
                                             : nmajor_desc<HN>(ks + n0 * 16, step);
                w::mma_ss<kDqCols, T, true, true>(dq, nmajor_desc<kRowsB90>(dss, step), kd, step > 0);
            }
            w::commit_group();
            w::wait_group<0>();  // also dK, dV (the first time): pa, da may change after this
            w::fence_operand(dq);
            // kWs: this step's reads of its buffer (Q and dO by the products just waited for,
            // lse and D above) are done: the producer may refill it.
            if constexpr (kWs) {
                if (h == 0) tma::mbarrier_arrive(&empty[buf]);
            }
            if (h == 0) {  // keeps pa, da alive (their registers unused) until the wait above
                w::fence_operand(dk);
                w::fence_operand(dv);
#pragma unroll
                for (int step = 0; step < kRowsB90 / 16; ++step) {
                    w::fence_operand(pa[step]);
                    w::fence_operand(da[step]);
                }
            }
            if constexpr (kBulk) {
                // The warpgroup's partial into its half of the stage, then one bulk reduction
                // into the tile's scratch by the warpgroup's first thread. The stage is free
                // once that thread's previous reduction has read it (waited for here, a whole
                // step after its issue), which the first barrier tells the others; the second
                // one (after the fence for the async proxy) that every store is in.
                const int tt = t % 128;
                float* stage = dq_stage + wg * (kRowsB90 * kDqCols);
                if (tt == 0) tma::bulk_wait_group_read<0>();
                named_barrier_sync(1 + wg, 128);
#pragma unroll
                for (int v = 0; v < kDqCols / 8; ++v)
                    *reinterpret_cast<float4*>(stage + (v * 128 + tt) * 4) =
                        make_float4(dq[4 * v], dq[4 * v + 1], dq[4 * v + 2], dq[4 * v + 3]);
                w::fence_proxy_async_shared();
                named_barrier_sync(1 + wg, 128);
                if (tt == 0) {
                    const std::int64_t tile = pair * dq_tiles(P.s) + i0 / kRowsB90;
                    tma::bulk_reduce_add_f32(dq_acc + (2 * tile + wg) * (kRowsB90 * kDqCols), stage,
                                             kRowsB90 * kDqCols * 4);
                    tma::bulk_commit_group();
                }
            } else if constexpr (kPipe) {
                // Accumulators i, i + 1 (i even) are one row's adjacent columns: one float2 atomic.
#pragma unroll
                for (int i = 0; i < kDqCols / 2; i += 2) {
                    const std::int64_t qi = i0 + 16 * warp + g + 8 * ((i / 2) % 2);
                    if (qi < P.s)
                        atomic_add2(dq_acc + (qi * P.pairs + pair) * HN + n0 + 8 * (i / 4) + 2 * q, dq[i], dq[i + 1]);
                }
            } else {
#pragma unroll
                for (int i = 0; i < kDqCols / 2; ++i) {
                    const std::int64_t qi = i0 + 16 * warp + g + 8 * ((i / 2) % 2);
                    if (qi < P.s)
                        atomicAdd(dq_acc + (qi * P.pairs + pair) * HN + n0 + 8 * (i / 4) + 2 * q + i % 2, dq[i]);
                }
            }
        }
    }
    // The last reductions done before the thread (and the block's shared memory) goes.
    if constexpr (kBulk) {
        if (t % 128 == 0) tma::bulk_wait_group<0>();
    }
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
        const std::int64_t j = j0 + (64 * wg + 16 * warp + 8 * rr + g);
        if (j >= P.s) continue;
        T* krow = dqkv + j * P.ldq + flash_k_at(P, kv) + 2 * q;
#pragma unroll
        for (int c = 0; c < HN / 8; ++c) {
            *reinterpret_cast<std::uint32_t*>(krow + 8 * c) = pack2<T>(dk[4 * c + 2 * rr], dk[4 * c + 2 * rr + 1]);
            *reinterpret_cast<std::uint32_t*>(krow + HN + 8 * c) = pack2<T>(dv[4 * c + 2 * rr], dv[4 * c + 2 * rr + 1]);
        }
    }
}

template <int HN, bool kDrop, bool kPipe, int WG, bool kBulk, bool kWs, typename T>
void launch_bwd90(const FlashParams& P, const void* qkv, const void* dout, const float* lse, const float* D,
                  void* dqkv, float* dq_acc, cudaStream_t st) {
    auto* k = flash_bwd_sm90<HN, kDrop, kPipe, WG, kBulk, kWs, T>;
    constexpr int smem = kSmemB90<HN, kPipe, WG, kBulk, kWs>;
    // kWs: qkv as one s x ldq matrix (every pair's Q, K, V column ranges of it) and dout as
    // one s x ldo, in 64 x 8 boxes; the other variants take the maps unencoded, unread.
    tma::TensorMap qkv_map{}, dout_map{};
    if constexpr (kWs) {
        const auto rows = static_cast<std::uint64_t>(P.s);
        const auto qcols = static_cast<std::uint64_t>(P.ldq), ocols = static_cast<std::uint64_t>(P.ldo);
        GPT_CUDA_CHECK(tma::make_tensor_map_2d(&qkv_map, qkv, rows, qcols, qcols * 2, kRowsB90, 8, 0),
                       "make_tensor_map_2d(flash_bwd_sm90 qkv)");
        GPT_CUDA_CHECK(tma::make_tensor_map_2d(&dout_map, dout, rows, ocols, ocols * 2, kRowsB90, 8, 0),
                       "make_tensor_map_2d(flash_bwd_sm90 dout)");
    }
    GPT_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                   "cudaFuncSetAttribute(flash_bwd_sm90)");
    const dim3 grid(static_cast<unsigned>((P.s + kKeysB90<WG> - 1) / kKeysB90<WG>),
                    static_cast<unsigned>(P.pairs / P.qpg));
    k<<<grid, kThreadsB90<WG> + (kWs ? 128 : 0), smem, st>>>(P, static_cast<const T*>(qkv),
                                                             static_cast<const T*>(dout), lse, D,
                                                             static_cast<T*>(dqkv), dq_acc, qkv_map, dout_map);
}

// dQ from kBulk's tiled scratch into its place in dqkv: a thread per 8 values of a row (one
// warpgroup half, one float4 number v: the float2 pairs of the row's 4 threads q), one
// 16-byte store.
template <int HN, typename T>
__global__ void flash_dq_store_tiled(FlashParams P, const float* dq_acc, T* dqkv) {
    constexpr int kHalf = HN / 2;  // columns a warpgroup's half holds
    static_assert(kHalf % 8 == 0, "8 columns never straddle the two halves");
    const std::int64_t n = P.s * P.pairs * HN / 8, tiles = dq_tiles(P.s);
    for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < n;
         e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t rp = e / (HN / 8), c = e % (HN / 8) * 8;  // rp = i * pairs + pair
        const std::int64_t i = rp / P.pairs, pair = rp % P.pairs;
        const int r = static_cast<int>(i % kRowsB90), half = static_cast<int>(c / kHalf), v = static_cast<int>(c % kHalf) / 8;
        // Row r is thread (warp r / 16, g r % 8)'s, accumulators 2 and 3 of a float4 when r % 16 >= 8.
        const float* src = dq_acc + (2 * (pair * tiles + i / kRowsB90) + half) * (kRowsB90 * kHalf) +
                           (v * 128 + r / 16 * 32 + r % 8 * 4) * 4 + (r % 16 >= 8 ? 2 : 0);
        float x[8];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const float2 f = *reinterpret_cast<const float2*>(src + 4 * q);
            x[2 * q] = f.x;
            x[2 * q + 1] = f.y;
        }
        uint4 packed;
        packed.x = pack2<T>(x[0], x[1]);
        packed.y = pack2<T>(x[2], x[3]);
        packed.z = pack2<T>(x[4], x[5]);
        packed.w = pack2<T>(x[6], x[7]);
        *reinterpret_cast<uint4*>(dqkv + i * P.ldq + flash_q_at(P, pair) + c) = packed;
    }
}

}  // namespace

std::size_t flash_dq_scratch_floats(std::int64_t s, std::int64_t pairs, std::int64_t hn) {
    return static_cast<std::size_t>(dq_tiles(s) * kRowsB90 * pairs * hn);
}

bool flash_sm90_bwd_supports(const FlashParams& P, DType t) {
    // No document masking here (the sm80 backward has it).
    return (P.hn == 64 || P.hn == 96 || P.hn == 128) && (t == DType::F16 || t == DType::BF16) && P.doc_start == nullptr;
}

void flash_backward_sm90(const FlashParams& P, DType t, const void* qkv, const void* dout, const float* lse,
                         const float* D, void* dqkv, float* dq_acc, Sm90Bwd variant, cudaStream_t st) {
    GPT_REQUIRE(flash_sm90_bwd_supports(P, t), InternalError, "flash_backward_sm90: unsupported case (hn ", P.hn,
                ")");
    const bool bulk = variant == Sm90Bwd::TwoWarpgroups || variant == Sm90Bwd::WarpSpecialized;
    const std::size_t scratch = bulk ? flash_dq_scratch_floats(P.s, P.pairs, P.hn) : static_cast<std::size_t>(P.s * P.pairs * P.hn);
    GPT_CUDA_CHECK(cudaMemsetAsync(dq_acc, 0, scratch * sizeof(float), st), "attention_backward (flash sm90)");
    const bool bf = t == DType::BF16;
    auto go = [&](auto hn, auto drop, auto pipe, auto wgs, auto bulk_dq, auto ws) {
        constexpr int H = decltype(hn)::value, WG = decltype(wgs)::value;
        constexpr bool Dr = decltype(drop)::value, Pi = decltype(pipe)::value, Bu = decltype(bulk_dq)::value,
                       Ws = decltype(ws)::value;
        bf ? launch_bwd90<H, Dr, Pi, WG, Bu, Ws, __nv_bfloat16>(P, qkv, dout, lse, D, dqkv, dq_acc, st)
           : launch_bwd90<H, Dr, Pi, WG, Bu, Ws, __half>(P, qkv, dout, lse, D, dqkv, dq_acc, st);
    };
    auto with_pipe = [&](auto hn, auto drop) {
        using One = std::integral_constant<int, 1>;
        using Two = std::integral_constant<int, 2>;
        if (variant == Sm90Bwd::TwoWarpgroups)
            go(hn, drop, std::true_type{}, Two{}, std::true_type{}, std::false_type{});
        else if (variant == Sm90Bwd::WarpSpecialized) {
            // At head dim 128 with dropout the consumers' 240 registers spill (the
            // two-warpgroup kernel needs 247): that case runs TwoWarpgroups, whose results
            // are the same to the bit (attention_flash.hpp, Sm90Bwd::WarpSpecialized).
            if constexpr (decltype(drop)::value && decltype(hn)::value == 128)
                go(hn, drop, std::true_type{}, Two{}, std::true_type{}, std::false_type{});
            else
                go(hn, drop, std::true_type{}, Two{}, std::true_type{}, std::true_type{});
        }
        else if (variant == Sm90Bwd::TwoWarpgroupsAtomicDq)
            go(hn, drop, std::true_type{}, Two{}, std::false_type{}, std::false_type{});
        else if (variant == Sm90Bwd::OneWarpgroup)
            go(hn, drop, std::true_type{}, One{}, std::false_type{}, std::false_type{});
        else
            go(hn, drop, std::false_type{}, One{}, std::false_type{}, std::false_type{});
    };
    auto with_drop = [&](auto hn) {
        P.drop ? with_pipe(hn, std::true_type{}) : with_pipe(hn, std::false_type{});
    };
    if (P.hn == 64)
        with_drop(std::integral_constant<int, 64>{});
    else if (P.hn == 96)
        with_drop(std::integral_constant<int, 96>{});
    else
        with_drop(std::integral_constant<int, 128>{});
    if (!bulk) {
        flash_dq_finish(P, t, dq_acc, dqkv, st);
        return;
    }
    auto finish = [&](auto hn) {
        constexpr int H = decltype(hn)::value;
        const unsigned blocks = grid_for(P.s * P.pairs * H / 8);
        if (bf)
            flash_dq_store_tiled<H, __nv_bfloat16><<<blocks, kThreads, 0, st>>>(P, dq_acc,
                                                                              static_cast<__nv_bfloat16*>(dqkv));
        else
            flash_dq_store_tiled<H, __half><<<blocks, kThreads, 0, st>>>(P, dq_acc, static_cast<__half*>(dqkv));
    };
    if (P.hn == 64)
        finish(std::integral_constant<int, 64>{});
    else if (P.hn == 96)
        finish(std::integral_constant<int, 96>{});
    else
        finish(std::integral_constant<int, 128>{});
    GPT_CUDA_CHECK(cudaGetLastError(), "flash_dq_store_tiled");
}

}  // namespace gpt::cuda
