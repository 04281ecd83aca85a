// Causal flash attention on tensor cores, FlashAttention-2's design (Dao 2023) written with
// the sm_80 warp instructions of mma_sm80.cuh (mma.sync m16n8k16, ldmatrix, cp.async):
//  - Scores and probabilities never leave registers: an mma accumulator fragment holds
//    16 x 8 scores whose rows the softmax statistics follow (four lanes share a row), and
//    converted to 16-bit it is already the A operand of the next product (P V, P^T dO).
//  - Forward: 128 query rows per block, 32 per warp, so each K/V fragment read from shared
//    memory feeds two MMAs; K/V tiles of 64 keys are double-buffered with cp.async, so the
//    next tile's load overlaps this tile's math. Blocks run diagonal-heavy first.
//  - Backward: 64 keys per block, 16 per warp, walking 64-query tiles from the diagonal on;
//    each warp computes S^T = K Q^T and dP^T = V dO^T for its keys, so dK and dV accumulate
//    in registers, and only dS goes through shared memory, for dQ = dS K, which is added to
//    an fp32 scratch with atomics (summed over key blocks; float2 atomics on sm_90) and
//    converted at the end.
// Rows of every shared tile are padded by 16 bytes: ldmatrix's eight 16-byte rows then fall
// in distinct bank groups for the head dims here (64, 80, 96, 128).
// Document masking (FlashParams::doc_start: query i sees keys [doc_start_i, i], doc_start
// never decreasing along a sample): masked scores are -inf like those above the diagonal, so
// their probabilities are exactly 0; the dropout mask is drawn as without it (the same
// Philox index per score), so only the masked scores differ. Whole tiles no row needs are
// skipped: the forward starts at the block's first row's doc_start and a warp skips a tile
// that ends before its first row's; the backward ends a head's walk at the first query tile
// whose first row starts after the block's last key. The kernels with the mask are separate
// instantiations (kDoc), so those without it keep their code and registers: with the mask's
// code in every kernel, head dim 96's forward on sm_90a went from 166 registers past the 170
// that three blocks an SM allow, and the element-draw backward at 96 spilled. ptxas (CUDA
// 13), sm_80 and sm_90a, with the mask: forward 195-255 registers, backward 190-255 (word
// draws only), no spills; two blocks an SM.
#include <cmath>
#include <type_traits>

#include "backend/cuda/attention_flash_params.cuh"
#include "backend/cuda/mma_sm80.cuh"

namespace gpt::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kBlockThreads = 32 * kWarps;
constexpr int kPad = 8;        // 16-bit elements of row padding
constexpr int kFwdRows = 128;  // queries per forward block (32 per warp: two m16 tiles)
constexpr int kBwdKeys = 64;   // keys per backward block (16 per warp)
// Keys per forward tile and queries per backward tile: smaller for the larger head dims,
// whose output (forward) or dK/dV (backward) accumulators take more registers; with 64 at
// head dim 128 ptxas spills (255 registers).
template <int HN>
constexpr int kFwdKeysOf = HN <= 80 ? 64 : 32;
template <int HN>
constexpr int kBwdRowsOf = HN <= 96 ? 64 : 32;
constexpr float kLog2e = 1.4426950408889634f;

// rows x HN elements (row stride ld) into a shared tile of row stride HN + kPad, 16 bytes per
// cp.async; rows at or past s are zero-filled (their source is not read).
template <int HN, typename T>
__device__ __forceinline__ void load_tile(T* tile, const T* base, std::int64_t r0, std::int64_t s,
                                          std::int64_t ld, int rows) {
    constexpr int kChunks = HN / 8, LH = HN + kPad;
    for (int e = threadIdx.x; e < rows * kChunks; e += blockDim.x) {
        const int r = e / kChunks, c = (e % kChunks) * 8;
        const bool valid = r0 + r < s;
        cp_async_16(tile + r * LH + c, base + (valid ? r0 + r : 0) * ld + c, valid);
    }
}

// Row and column of 8x8 matrix (lane / 8) that this lane addresses in an ldmatrix .x4 of a
// 16x16 block, for the two operand shapes used here:
//  a16x16: matrices (rows 0-7, cols 0-7), (rows 8-15, 0-7), (0-7, 8-15), (8-15, 8-15) -- the
//          A fragment a[0..3] of a row-major tile, or (with .trans) B pairs of a k-major one;
//  b8x16:  matrices (rows 0-7, cols 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15) -- b[0], b[1]
//          of n-tile rows 0-7 then of rows 8-15, for B stored n-major (a K tile for Q K^T).
__device__ __forceinline__ int a_row(int lane) { return lane % 16; }
__device__ __forceinline__ int a_col(int lane) { return lane / 16 * 8; }
__device__ __forceinline__ int b_row(int lane) { return lane / 16 * 8 + lane % 8; }
__device__ __forceinline__ int b_col(int lane) { return lane / 8 % 2 * 8; }

// The A fragment (16 x 16) made of two adjacent 16x8 accumulator tiles, rounded to T.
template <typename T>
__device__ __forceinline__ void acc_to_a(std::uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
    a[0] = pack2<T>(lo[0], lo[1]);
    a[1] = pack2<T>(lo[2], lo[3]);
    a[2] = pack2<T>(hi[0], hi[1]);
    a[3] = pack2<T>(hi[2], hi[3]);
}

// Sum / max over the four lanes that share a fragment row.
__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

template <int HN, bool kWords = false, bool kDoc = false>
constexpr std::size_t fwd_smem() {
    // Q, 2 x (K, V); with kDoc the rows' doc_start; with kWords a tile's keep bits (a word per
    // row and 32 keys).
    return static_cast<std::size_t>(kFwdRows + 4 * kFwdKeysOf<HN>) * (HN + kPad) * 2 + (kDoc ? kFwdRows * 4 : 0) +
           (kWords ? static_cast<std::size_t>(kFwdRows) * kFwdKeysOf<HN> / 8 : 0);
}

// kDrop: attention dropout on (a separate instantiation: the Philox draws cost registers).
// kWords (with kDrop; GPT_CUDA_DROPOUT_DRAWS=word, the default): each warp draws its 32 rows'
// keep bits of a key tile as words from whole Philox blocks (dropout_keep_bits) into its own
// shared memory before S = Q K^T, a word or two a lane (8 or 9 blocks each), and reads them
// back where P is formed; where one block per two adjacent keys (dropout_mult_pair, element)
// took 16 or 32 a lane. The same mask bit for bit. Head dims 64, 80, 96 (at 128 it spills:
// flash_forward_sm80 keeps the pairs there). ptxas (CUDA 13), registers a thread at head dims
// 64 / 80 / 96, sm_80 and sm_90a: words 236-239 / 249 / 168-219, pairs 226 / 238-246 /
// 190-196, no spills; two blocks (eight warps) an SM in each case but head dim 96 on
// sm_90a with words, three (168 registers; three need at most 170).
// kDoc: document masking (P.doc_start set).
template <int HN, bool kDrop, bool kWords, bool kDoc, typename T>
__global__ void __launch_bounds__(kBlockThreads) flash_fwd_sm80(FlashParams P, const T* qkv, T* out, float* lse) {
    static_assert(kDrop || !kWords, "keep words are dropout's");
    constexpr int kFwdKeys = kFwdKeysOf<HN>;
    constexpr int LH = HN + kPad, MT = 2, NT = kFwdKeys / 8, OT = HN / 8;
    extern __shared__ __align__(128) unsigned char smem[];
    T* qs = reinterpret_cast<T*>(smem);
    T* kvs = qs + kFwdRows * LH;  // stage st: K at kvs + 2*st*kFwdKeys*LH, V after it
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    // kDoc: each row's doc_start (rows past s: the last row's), in shared memory rather than
    // registers: the softmax reads it only on tiles it masks.
    std::int32_t* sdoc = reinterpret_cast<std::int32_t*>(kvs + 4 * kFwdKeys * LH);
    // kWords: the warp's words, row r's word h (keys 32h..) at r * kWpr + h.
    constexpr int kWpr = kFwdKeys / 32;
    std::uint32_t* wkeeps = reinterpret_cast<std::uint32_t*>(sdoc + (kDoc ? kFwdRows : 0)) + warp * 32 * kWpr;
    const std::int64_t pair = blockIdx.y;
    const std::int64_t i0 = static_cast<std::int64_t>(gridDim.x - 1 - blockIdx.x) * kFwdRows;
    const std::int64_t w0 = i0 + warp * 32;  // this warp's first query row
    const T* qb = qkv + flash_q_at(P, pair);
    const T* kb = qkv + flash_k_at(P, pair / P.qpg);  // the group's K, then V
    const int ntiles = static_cast<int>((min(P.s, i0 + kFwdRows) - 1) / kFwdKeys + 1);
    // Document masking: no row of the block sees a key before its first row's doc_start (the
    // smallest), so the walk starts at that key's tile.
    const int first_tile = kDoc ? static_cast<int>(flash_doc_start(P, pair, i0) / kFwdKeys) : 0;
    if constexpr (kDoc)
        for (int r = threadIdx.x; r < kFwdRows; r += blockDim.x)  // seen after the loop's first barrier
            sdoc[r] = static_cast<std::int32_t>(flash_doc_start(P, pair, min(i0 + r, P.s - 1)));
    auto load_kv = [&](int tile, int st) {
        load_tile<HN>(kvs + 2 * st * kFwdKeys * LH, kb, tile * std::int64_t{kFwdKeys}, P.s, P.ldq, kFwdKeys);
        load_tile<HN>(kvs + (2 * st + 1) * kFwdKeys * LH, kb + HN, tile * std::int64_t{kFwdKeys}, P.s, P.ldq,
                      kFwdKeys);
    };
    load_tile<HN>(qs, qb, i0, P.s, P.ldq, kFwdRows);
    load_kv(first_tile, first_tile % 2);
    cp_async_commit();

    float o[MT][OT][4];
    float m[MT][2], l[MT][2];  // running max (raw scores) and this lane's share of the row sum
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int ot = 0; ot < OT; ++ot) o[mt][ot][0] = o[mt][ot][1] = o[mt][ot][2] = o[mt][ot][3] = 0.0f;
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.0f;
    }
    const float sl2 = P.scale * kLog2e;
    const std::int64_t warp_last = min(w0 + 31, P.s - 1);
    for (int it = first_tile; it < ntiles; ++it) {
        if (it + 1 < ntiles) {
            load_kv(it + 1, (it + 1) % 2);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();  // tile `it` (and Q) landed for every thread's copies
        const std::int64_t j0 = static_cast<std::int64_t>(it) * kFwdKeys;
        // Warp-uniform: some row of this warp sees a key of the tile (causal, and document:
        // the warp's first row has its smallest doc_start).
        if (j0 <= warp_last && (!kDoc || j0 + kFwdKeys > sdoc[warp * 32])) {
            const T* ks = kvs + 2 * (it % 2) * kFwdKeys * LH;
            const T* vs = ks + kFwdKeys * LH;
            // kWords: written after the previous tile's reads (the block barrier ending its
            // iteration), read after the warp's barrier.
            if constexpr (kWords) {
#pragma unroll 1
                for (int wi = lane; wi < 32 * kWpr; wi += 32)
                    wkeeps[wi] = dropout_keep_bits<32>(P, pair, w0 + wi / kWpr, j0 + 32 * (wi % kWpr));
                __syncwarp();
            }
            float sc[MT][NT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) sc[mt][nt][0] = sc[mt][nt][1] = sc[mt][nt][2] = sc[mt][nt][3] = 0.0f;
            // Not fully unrolled: ptxas then hoists every step's Q fragments and spills at
            // head dim 128.
#pragma unroll 2
            for (int kk = 0; kk < HN / 16; ++kk) {  // S = Q K^T
                std::uint32_t a[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
                    ldmatrix_x4(a[mt], qs + (warp * 32 + mt * 16 + a_row(lane)) * LH + kk * 16 + a_col(lane));
#pragma unroll
                for (int np = 0; np < NT / 2; ++np) {
                    std::uint32_t b[4];
                    ldmatrix_x4(b, ks + (np * 16 + b_row(lane)) * LH + kk * 16 + b_col(lane));
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma_16816<T>(sc[mt][2 * np], a[mt], b[0], b[1]);
                        mma_16816<T>(sc[mt][2 * np + 1], a[mt], b[2], b[3]);
                    }
                }
            }
            // Document masking first: where the tile starts before the warp's last row's
            // doc_start (the largest; warp-uniform), keys before each row's are masked. Apart
            // from the causal mask below so that the tiles without it run as before.
            if (kDoc && j0 < sdoc[warp * 32 + 31]) {
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int rr = 0; rr < 2; ++rr) {
                        const int lo = sdoc[warp * 32 + mt * 16 + rr * 8 + g] - static_cast<int>(j0);
#pragma unroll
                        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                            for (int cc = 0; cc < 2; ++cc)
                                if (nt * 8 + 2 * t + cc < lo) sc[mt][nt][2 * rr + cc] = -INFINITY;
                    }
            }
            // Online softmax per row (rr = 0: row g, 1: row g + 8 of each m-tile). Keys past
            // a row (j > i) are masked; keys past the sequence only meet rows past it.
            const bool diagonal = j0 + kFwdKeys - 1 > w0;
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int rr = 0; rr < 2; ++rr) {
                    const std::int64_t i = w0 + mt * 16 + rr * 8 + g;
                    float mx = m[mt][rr];
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                        for (int cc = 0; cc < 2; ++cc) {
                            float& v = sc[mt][nt][2 * rr + cc];
                            if (diagonal && j0 + nt * 8 + 2 * t + cc > i) v = -INFINITY;
                            mx = fmaxf(mx, v);
                        }
                    mx = quad_max(mx);
                    // Finite without document masking: key 0 of the first tile is in every row.
                    // With it -inf where the row has seen no key yet (its document starts past
                    // this tile): base 0 then makes every p and alpha exp2(-inf) = 0 instead of
                    // exp2(-inf - -inf) = NaN, and the row's state (m = -inf, l = 0, o = 0)
                    // stays as it was.
                    const float base = kDoc && mx == -INFINITY ? 0.0f : mx * sl2;
                    const float alpha = exp2f(m[mt][rr] * sl2 - base);  // 0 on the first tile
                    m[mt][rr] = mx;
                    float sum = 0.0f;
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt) {
                        // Keys 2t and 2t + 1: from the warp's words (kWords), else one Philox
                        // block for both (dropout_mult_pair).
                        float m0 = 1.0f, m1 = 1.0f;
                        if constexpr (kWords) {
                            // Row mt 16 + rr 8 + g, keys nt 8 + 2t (+1): word nt / 4, bits 8 (nt % 4) + 2t.
                            const std::uint32_t bits = wkeeps[(mt * 16 + rr * 8 + g) * kWpr + nt / 4] >> (8 * (nt % 4) + 2 * t);
                            m0 = bits & 1u ? P.keep_scale : 0.0f;
                            m1 = bits & 2u ? P.keep_scale : 0.0f;
                        } else if constexpr (kDrop) {
                            dropout_mult_pair(P, pair, i, j0 + nt * 8 + 2 * t, m0, m1);
                        }
#pragma unroll
                        for (int cc = 0; cc < 2; ++cc) {
                            float& v = sc[mt][nt][2 * rr + cc];
                            const float p = exp2f(v * sl2 - base);  // 0 where masked
                            sum += p;
                            v = kDrop ? p * (cc == 0 ? m0 : m1) : p;
                        }
                    }
                    l[mt][rr] = l[mt][rr] * alpha + sum;
#pragma unroll
                    for (int ot = 0; ot < OT; ++ot) {
                        o[mt][ot][2 * rr] *= alpha;
                        o[mt][ot][2 * rr + 1] *= alpha;
                    }
                }
#pragma unroll
            for (int kk = 0; kk < kFwdKeys / 16; ++kk) {  // O += P V
                std::uint32_t a[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) acc_to_a<T>(a[mt], sc[mt][2 * kk], sc[mt][2 * kk + 1]);
#pragma unroll
                for (int np = 0; np < OT / 2; ++np) {
                    std::uint32_t b[4];
                    ldmatrix_x4_trans(b, vs + (kk * 16 + b_col(lane) + lane % 8) * LH + np * 16 + lane / 16 * 8);
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma_16816<T>(o[mt][2 * np], a[mt], b[0], b[1]);
                        mma_16816<T>(o[mt][2 * np + 1], a[mt], b[2], b[3]);
                    }
                }
            }
        }
        __syncthreads();  // this stage is refilled at the next iteration (tile it + 2)
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
            const float sum = quad_sum(l[mt][rr]);
            const std::int64_t i = w0 + mt * 16 + rr * 8 + g;
            if (i >= P.s) continue;
            const float inv = 1.0f / sum;
            T* orow = out + i * P.ldo + pair * HN + 2 * t;
#pragma unroll
            for (int ot = 0; ot < OT; ++ot)
                *reinterpret_cast<std::uint32_t*>(orow + ot * 8) =
                    pack2<T>(o[mt][ot][2 * rr] * inv, o[mt][ot][2 * rr + 1] * inv);
            if (t == 0) lse[pair * P.s + i] = m[mt][rr] * P.scale + logf(sum);
        }
}

// Per stage of the backward's statistics: lse, D and with kDoc the queries' doc_start.
template <bool kDoc>
constexpr int kStatsOf = kDoc ? 3 : 2;

template <int HN, bool kWords = false, bool kDoc = false>
constexpr std::size_t bwd_smem() {
    constexpr int kBwdRows = kBwdRowsOf<HN>;
    // K, V; two stages of (Q, dO); dS^T [keys][queries]; two stages of the statistics; with
    // kWords a step's keep bits (two words a query).
    return static_cast<std::size_t>(2 * kBwdKeys + 4 * kBwdRows) * (HN + kPad) * 2 +
           static_cast<std::size_t>(kBwdKeys) * (kBwdRows + kPad) * 2 + 2 * kStatsOf<kDoc> * kBwdRows * 4 +
           (kWords ? 2 * kBwdRows * 4 : 0);
}

// kDrop: attention dropout on. kWords (with kDrop; GPT_CUDA_DROPOUT_DRAWS=word, the default):
// the step's keep bits drawn a word (or half word) a thread from whole Philox blocks
// (dropout_keep_bits) into shared memory at the top of the step, when dK and dV are the only
// large live arrays, and read back where P^T is formed: 8 or 9 blocks a thread and step at
// head dims up to 96 (64 queries x 64 keys: 128 words), 4 or 5 at 128 (32 queries: 64 words,
// a half word a thread), where one draw per fragment element (GPT_CUDA_DROPOUT_DRAWS=element,
// the kernel before) took 32 or 16. The same mask bit for bit. ptxas (CUDA 13), registers a
// thread at head dims 64 / 80 / 96 / 128, sm_80 and sm_90a: word 224-228 / 240 / 248 / 242,
// element 188-190 / 239-242 / 244-251 / 242-244, no spills; two blocks (eight warps) an SM
// either way (three would need at most 170 a thread).
// kDoc: document masking (P.doc_start set).
template <int HN, bool kDrop, bool kWords, bool kDoc, typename T>
__global__ void __launch_bounds__(kBlockThreads) flash_bwd_sm80(FlashParams P, const T* qkv, const T* dout,
                                                                const float* lse, const float* D, T* dqkv,
                                                                float* dq_acc) {
    static_assert(kDrop || !kWords, "keep words are dropout's");
    constexpr int kBwdRows = kBwdRowsOf<HN>;
    constexpr int LH = HN + kPad, LS = kBwdRows + kPad, QT = kBwdRows / 8, OT = HN / 8;
    // dQ of a tile: warps split its 16-query m-tiles, then (for 32-query tiles) the head dim.
    constexpr int kMTiles = kBwdRows / 16, kSplit = kWarps / kMTiles, kNp = OT / 2 / kSplit;
    static_assert(kWarps % kMTiles == 0 && (OT / 2) % kSplit == 0, "dQ work must split evenly over the warps");
    extern __shared__ __align__(128) unsigned char smem[];
    T* ks = reinterpret_cast<T*>(smem);
    T* vs = ks + kBwdKeys * LH;
    T* qdo = vs + kBwdKeys * LH;  // stage st: Q at qdo + 2*st*kBwdRows*LH, dO after it
    T* dss = qdo + 4 * kBwdRows * LH;
    // Stage st: lse, D, then (kDoc) each query's doc_start (int32; s past s: those rows see no
    // key, and the tile's last row has the largest), at fixed offsets from the stage's lse,
    // whose address the step computes anyway.
    constexpr int kStats = kStatsOf<kDoc>;
    float* stats = reinterpret_cast<float*>(dss + kBwdKeys * LS);
    // kWords: the step's keep bits, word 2 query + half.
    std::uint32_t* keeps = reinterpret_cast<std::uint32_t*>(stats + 2 * kStats * kBwdRows);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    // A block per (kv pair, 64 keys): it walks the query tiles of the group's heads in head
    // order (step it: head it / ntiles, tile it % ntiles), so the group's dK/dV is summed in
    // registers in a fixed order; dQ goes to each head's own rows of the scratch.
    const std::int64_t kv = blockIdx.y, j0 = static_cast<std::int64_t>(blockIdx.x) * kBwdKeys;
    const std::int64_t kw0 = j0 + warp * 16;  // this warp's first key
    const T* kb = qkv + flash_k_at(P, kv);
    // Query tiles from the diagonal to s; with document masking only up to the first row
    // whose doc_start lies past the block's last key (doc_start never decreases, so no later
    // row sees a key of the block: a binary search over the sample's row; the same for the
    // group's heads, one sample).
    std::int64_t rows_end = P.s;
    if constexpr (kDoc) {
        const std::int32_t* doc = P.doc_start + kv * P.qpg / P.np * P.s;
        const std::int64_t block_last = min(j0 + kBwdKeys, P.s) - 1;
        std::int64_t lo = j0, hi = P.s;  // doc[j0] <= j0 <= block_last: at least one tile
        while (lo < hi) {
            const std::int64_t mid = (lo + hi) / 2;
            if (doc[mid] > block_last)
                hi = mid;
            else
                lo = mid + 1;
        }
        rows_end = lo;
    }
    const int ntiles = static_cast<int>((rows_end - j0 + kBwdRows - 1) / kBwdRows);
    const int nsteps = ntiles * static_cast<int>(P.qpg);
    auto load_rows = [&](int step, int st) {
        const std::int64_t pair = kv * P.qpg + step / ntiles;
        const std::int64_t i0 = j0 + static_cast<std::int64_t>(step % ntiles) * kBwdRows;
        load_tile<HN>(qdo + 2 * st * kBwdRows * LH, qkv + flash_q_at(P, pair), i0, P.s, P.ldq, kBwdRows);
        load_tile<HN>(qdo + (2 * st + 1) * kBwdRows * LH, dout + pair * HN, i0, P.s, P.ldo, kBwdRows);
        for (int e = threadIdx.x; e < kBwdRows; e += blockDim.x) {
            const bool valid = i0 + e < P.s;
            stats[kStats * st * kBwdRows + e] = valid ? lse[pair * P.s + i0 + e] : 0.0f;
            stats[(kStats * st + 1) * kBwdRows + e] = valid ? D[pair * P.s + i0 + e] : 0.0f;
            if constexpr (kDoc)
                reinterpret_cast<std::int32_t*>(stats)[(kStats * st + 2) * kBwdRows + e] =
                    static_cast<std::int32_t>(valid ? flash_doc_start(P, pair, i0 + e) : P.s);
        }
    };
    load_tile<HN>(ks, kb, j0, P.s, P.ldq, kBwdKeys);
    load_tile<HN>(vs, kb + HN, j0, P.s, P.ldq, kBwdKeys);
    load_rows(0, 0);
    cp_async_commit();

    float dk[OT][4], dv[OT][4];
#pragma unroll
    for (int ot = 0; ot < OT; ++ot)
#pragma unroll
        for (int c = 0; c < 4; ++c) dk[ot][c] = dv[ot][c] = 0.0f;
    const float sl2 = P.scale * kLog2e;
    for (int it = 0; it < nsteps; ++it) {
        const std::int64_t pair = kv * P.qpg + it / ntiles;
        const std::int64_t i0 = j0 + static_cast<std::int64_t>(it % ntiles) * kBwdRows;
        // kWords: this step's keep bits, kN a thread (query tid / (64 / kN), keys from
        // j0 + kN (tid % (64 / kN))); little-endian, half word 2w + h is bits 16h.. of word w.
        // Written after every thread passed the previous step's dS^T barrier (past its last
        // read of them), read after this step's barrier below.
        if constexpr (kWords) {
            constexpr int kN = kBwdRows / 2, kPer = kBwdKeys / kN;
            const int tid = threadIdx.x;
            const std::uint32_t bits = dropout_keep_bits<kN>(P, pair, i0 + tid / kPer, j0 + kN * (tid % kPer));
            if constexpr (kN == 32)
                keeps[tid] = bits;
            else
                reinterpret_cast<std::uint16_t*>(keeps)[tid] = static_cast<std::uint16_t>(bits);
        }
        if (it + 1 < nsteps) {
            load_rows(it + 1, (it + 1) % 2);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();  // tile `it` landed (and its lse/D stores are visible)
        const int st = it % 2;
        const T* qs = qdo + 2 * st * kBwdRows * LH;
        const T* dos = qs + kBwdRows * LH;
        const float* ls = stats + kStats * st * kBwdRows;
        const float* dl = ls + kBwdRows;
        const std::int32_t* qd = reinterpret_cast<const std::int32_t*>(ls + 2 * kBwdRows);
        float s_t[QT][4], dp_t[QT][4];  // S^T and dP^T: this warp's 16 keys x 64 queries
#pragma unroll
        for (int q = 0; q < QT; ++q)
#pragma unroll
            for (int c = 0; c < 4; ++c) s_t[q][c] = dp_t[q][c] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < HN / 16; ++kk) {
            std::uint32_t ak[4], av[4];
            ldmatrix_x4(ak, ks + (warp * 16 + a_row(lane)) * LH + kk * 16 + a_col(lane));
            ldmatrix_x4(av, vs + (warp * 16 + a_row(lane)) * LH + kk * 16 + a_col(lane));
#pragma unroll
            for (int np = 0; np < QT / 2; ++np) {
                std::uint32_t bq[4], bd[4];
                ldmatrix_x4(bq, qs + (np * 16 + b_row(lane)) * LH + kk * 16 + b_col(lane));
                ldmatrix_x4(bd, dos + (np * 16 + b_row(lane)) * LH + kk * 16 + b_col(lane));
                mma_16816<T>(s_t[2 * np], ak, bq[0], bq[1]);
                mma_16816<T>(s_t[2 * np + 1], ak, bq[2], bq[3]);
                mma_16816<T>(dp_t[2 * np], av, bd[0], bd[1]);
                mma_16816<T>(dp_t[2 * np + 1], av, bd[2], bd[3]);
            }
        }
        // P^T (dropped) and dS^T in place; query i sees key j when j <= i < s (per element only
        // on the diagonal and the last tile), and with kDoc when doc_start_i <= j (below).
        const bool edge = i0 < kw0 + 15 || i0 + kBwdRows > P.s;
#pragma unroll
        for (int q = 0; q < QT; ++q)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int iq = q * 8 + 2 * t + c % 2;
                const std::int64_t i = i0 + iq, j = kw0 + c / 2 * 8 + g;
                float pm = 0.0f, ds = 0.0f;
                if (!edge || (j <= i && i < P.s)) {
                    const float p = exp2f(s_t[q][c] * sl2 - ls[iq] * kLog2e);
                    // kWords: key warp 16 + 8 (c / 2) + g of the block, bit 16 (warp % 2) +
                    // 8 (c / 2) + g of word warp / 2 of query iq.
                    const float mult = kWords ? ((keeps[2 * iq + warp / 2] >> (16 * (warp % 2) + 8 * (c / 2) + g) & 1u)
                                                     ? P.keep_scale
                                                     : 0.0f)
                                       : kDrop ? dropout_mult(P, pair, i, j)
                                               : 1.0f;
                    pm = p * mult;
                    ds = p * (dp_t[q][c] * mult - dl[iq]) * P.scale;
                }
                s_t[q][c] = pm;
                dp_t[q][c] = ds;
            }
        // Document masking: where the tile's last query (its largest doc_start) starts after the
        // warp's first key, P^T and dS^T are zeroed (assigned: a masked key's p may be inf)
        // before each query's doc_start. A pass of its own: inside the loop above it spilled
        // the element-draw variant at head dims 80 and 96.
        if (kDoc && qd[kBwdRows - 1] > kw0) {
#pragma unroll
            for (int q = 0; q < QT; ++q)
#pragma unroll
                for (int c = 0; c < 4; ++c)
                    if (kw0 + c / 2 * 8 + g < qd[q * 8 + 2 * t + c % 2]) s_t[q][c] = dp_t[q][c] = 0.0f;
        }
        // dV += P^T dO and dK += dS^T Q (k = the tile's queries); dS^T to shared memory.
#pragma unroll
        for (int kq = 0; kq < kBwdRows / 16; ++kq) {
            std::uint32_t ap[4], ad[4];
            acc_to_a<T>(ap, s_t[2 * kq], s_t[2 * kq + 1]);
            acc_to_a<T>(ad, dp_t[2 * kq], dp_t[2 * kq + 1]);
#pragma unroll
            for (int np = 0; np < OT / 2; ++np) {
                std::uint32_t b[4];
                const int row = kq * 16 + b_col(lane) + lane % 8, col = np * 16 + lane / 16 * 8;
                ldmatrix_x4_trans(b, dos + row * LH + col);
                mma_16816<T>(dv[2 * np], ap, b[0], b[1]);
                mma_16816<T>(dv[2 * np + 1], ap, b[2], b[3]);
                ldmatrix_x4_trans(b, qs + row * LH + col);
                mma_16816<T>(dk[2 * np], ad, b[0], b[1]);
                mma_16816<T>(dk[2 * np + 1], ad, b[2], b[3]);
            }
            T* drow = dss + (warp * 16 + g) * LS + kq * 16 + 2 * t;
            *reinterpret_cast<std::uint32_t*>(drow) = ad[0];
            *reinterpret_cast<std::uint32_t*>(drow + 8 * LS) = ad[1];
            *reinterpret_cast<std::uint32_t*>(drow + 8) = ad[2];
            *reinterpret_cast<std::uint32_t*>(drow + 8 * LS + 8) = ad[3];
        }
        __syncthreads();  // every warp's dS^T rows are in place
        // dQ (16 queries of the tile, kNp pairs of n-tiles of the head dim) += dS K over the
        // block's 64 keys.
        const int mq = warp % kMTiles, np0 = warp / kMTiles * kNp;
        std::uint32_t a[kBwdKeys / 16][4];
#pragma unroll
        for (int kk = 0; kk < kBwdKeys / 16; ++kk)
            ldmatrix_x4_trans(a[kk], dss + (kk * 16 + b_row(lane)) * LS + mq * 16 + b_col(lane));
        const std::int64_t iw = i0 + mq * 16 + g;
#pragma unroll
        for (int np = np0; np < np0 + kNp; ++np) {
            float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
            for (int kk = 0; kk < kBwdKeys / 16; ++kk) {
                std::uint32_t b[4];
                ldmatrix_x4_trans(b, ks + (kk * 16 + b_col(lane) + lane % 8) * LH + np * 16 + lane / 16 * 8);
                mma_16816<T>(acc[0], a[kk], b[0], b[1]);
                mma_16816<T>(acc[1], a[kk], b[2], b[3]);
            }
            // Accumulators c, c + 1 (c even) are one row's adjacent columns: one float2 atomic
            // on sm_90 (the H100/H200 build of this kernel), two scalar ones on sm_80.
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int c = 0; c < 4; c += 2) {
                    const std::int64_t i = iw + c / 2 * 8;
                    if (i < P.s)
                        atomic_add2(dq_acc + (i * P.pairs + pair) * HN + np * 16 + h * 8 + 2 * t, acc[h][c], acc[h][c + 1]);
                }
        }
        // No barrier here: this stage's last reads (dV, dK) precede the one above, and dS^T is
        // next written after the next iteration's first barrier.
    }
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
        const std::int64_t j = kw0 + rr * 8 + g;
        if (j >= P.s) continue;
        T* krow = dqkv + j * P.ldq + flash_k_at(P, kv) + 2 * t;
#pragma unroll
        for (int ot = 0; ot < OT; ++ot) {
            *reinterpret_cast<std::uint32_t*>(krow + ot * 8) = pack2<T>(dk[ot][2 * rr], dk[ot][2 * rr + 1]);
            *reinterpret_cast<std::uint32_t*>(krow + HN + ot * 8) = pack2<T>(dv[ot][2 * rr], dv[ot][2 * rr + 1]);
        }
    }
}

// dQ from the fp32 scratch [s, pairs, HN] into its place in dqkv: a thread per 8 values
// (two 16-byte loads, one 16-byte store; qkv rows and HN are multiples of 8 elements), the
// division by the head dim a compile-time constant.
template <int HN, typename T>
__global__ void flash_dq_store(FlashParams P, const float* dq_acc, T* dqkv) {
    static_assert(HN % 8 == 0, "a pack of 8 never straddles two rows");
    const std::int64_t n = P.s * P.pairs * HN / 8;
    for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < n;
         e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t rp = e / (HN / 8), c = e % (HN / 8) * 8;  // rp = i * pairs + pair
        const float4 lo = reinterpret_cast<const float4*>(dq_acc)[2 * e];
        const float4 hi = reinterpret_cast<const float4*>(dq_acc)[2 * e + 1];
        uint4 packed;
        packed.x = pack2<T>(lo.x, lo.y);
        packed.y = pack2<T>(lo.z, lo.w);
        packed.z = pack2<T>(hi.x, hi.y);
        packed.w = pack2<T>(hi.z, hi.w);
        *reinterpret_cast<uint4*>(dqkv + rp / P.pairs * P.ldq + flash_q_at(P, rp % P.pairs) + c) = packed;
    }
}

// Calls f(std::integral_constant<int, HN>{}) for the head dims with kernels.
template <typename F>
bool with_head_dim(std::int64_t hn, F&& f) {
    switch (hn) {
        case 64: f(std::integral_constant<int, 64>{}); return true;
        case 80: f(std::integral_constant<int, 80>{}); return true;
        case 96: f(std::integral_constant<int, 96>{}); return true;
        case 128: f(std::integral_constant<int, 128>{}); return true;
        default: return false;
    }
}

template <typename F>
void with_dropout(bool drop, F&& f) {
    if (drop)
        f(std::true_type{});
    else
        f(std::false_type{});
}

// Calls f(T{}) for the 16-bit storage type of t.
template <typename F>
void with_half_type(DType t, F&& f) {
    if (t == DType::F16) return f(__half{});
    GPT_REQUIRE(t == DType::BF16, InternalError, "flash attention on tensor cores: fp16 or bf16 only");
    f(__nv_bfloat16{});
}

// Calls f(T{}, integral_constant<HN>, bool_constant<dropout>) for the call's variant.
template <typename F>
void with_variant(const FlashParams& P, DType dt, F&& f) {
    with_half_type(dt, [&](auto tag) {
        with_head_dim(P.hn, [&](auto hn) { with_dropout(P.drop, [&](auto drop) { f(tag, hn, drop); }); });
    });
}

// with_variant with a fourth argument, bool_constant<keep words>: with dropout, whether the
// kernel draws its mask as words (GPT_CUDA_DROPOUT_DRAWS=word, the default) or per element.
template <typename F>
void with_variant_draws(const FlashParams& P, DType dt, F&& f) {
    const bool words = !flash_dropout_draws_per_element();
    with_variant(P, dt, [&](auto tag, auto hn, auto drop) {
        if constexpr (decltype(drop)::value) {
            if (words)
                f(tag, hn, drop, std::true_type{});
            else
                f(tag, hn, drop, std::false_type{});
        } else {
            f(tag, hn, drop, std::false_type{});
        }
    });
}

// with_variant_draws with a fifth argument, bool_constant<document masking>: whether
// P.doc_start is set.
template <typename F>
void with_variant_draws_doc(const FlashParams& P, DType dt, F&& f) {
    with_variant_draws(P, dt, [&](auto tag, auto hn, auto drop, auto words) {
        if (P.doc_start != nullptr)
            f(tag, hn, drop, words, std::true_type{});
        else
            f(tag, hn, drop, words, std::false_type{});
    });
}

// Raises a kernel's dynamic shared memory limit (above the 48 KiB default) once per process.
template <typename K>
void allow_smem(K kernel, std::size_t bytes, const char* op) {
    static_assert(std::is_pointer_v<K>);
    GPT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
                   op);
}

unsigned blocks_of(std::int64_t s, int rows) { return static_cast<unsigned>((s + rows - 1) / rows); }

}  // namespace

bool flash_sm80_head_dim(std::int64_t hn) {
    return with_head_dim(hn, [](auto) {});
}

void flash_forward_sm80(const FlashParams& P, DType dt, const void* qkv, void* out, float* lse,
                        cudaStream_t stream) {
    with_variant_draws_doc(P, dt, [&](auto tag, auto hn, auto drop, auto words, auto doc) {
        using T = decltype(tag);
        constexpr int H = decltype(hn)::value;
        // Not at head dim 128, where the words' reads in the softmax spill (255 registers,
        // 4 bytes; the volatile read of each word as well): pairs there.
        constexpr bool W = decltype(words)::value && H != 128, Doc = decltype(doc)::value;
        const auto kernel = &flash_fwd_sm80<H, decltype(drop)::value, W, Doc, T>;
        constexpr std::size_t bytes = fwd_smem<H, W, Doc>();
        static const bool once = (allow_smem(kernel, bytes, "attention_forward (flash)"), true);
        (void)once;
        const dim3 grid(blocks_of(P.s, kFwdRows), static_cast<unsigned>(P.pairs));
        kernel<<<grid, kBlockThreads, bytes, stream>>>(P, static_cast<const T*>(qkv), static_cast<T*>(out), lse);
    });
}

void flash_backward_sm80(const FlashParams& P, DType dt, const void* qkv, const void* dout, const float* lse,
                         const float* D, void* dqkv, float* dq_acc, cudaStream_t stream) {
    GPT_CUDA_CHECK(cudaMemsetAsync(dq_acc, 0, static_cast<std::size_t>(P.s * P.pairs * P.hn) * sizeof(float), stream),
                   "attention_backward (flash)");
    with_variant_draws_doc(P, dt, [&](auto tag, auto hn, auto drop, auto words, auto doc) {
        using T = decltype(tag);
        constexpr int H = decltype(hn)::value;
        // With document masking the keep bits are drawn as words whatever the choice (the same
        // mask): the element-draw variant with the mask spills at head dim 96 (251 registers
        // without it).
        constexpr bool Doc = decltype(doc)::value, W = decltype(words)::value || (Doc && decltype(drop)::value);
        const auto kernel = &flash_bwd_sm80<H, decltype(drop)::value, W, Doc, T>;
        constexpr std::size_t bytes = bwd_smem<H, W, Doc>();
        static const bool once = (allow_smem(kernel, bytes, "attention_backward (flash)"), true);
        (void)once;
        const dim3 grid(blocks_of(P.s, kBwdKeys), static_cast<unsigned>(P.pairs / P.qpg));
        kernel<<<grid, kBlockThreads, bytes, stream>>>(P, static_cast<const T*>(qkv), static_cast<const T*>(dout), lse,
                                                        D, static_cast<T*>(dqkv), dq_acc);
    });
    flash_dq_finish(P, dt, dq_acc, dqkv, stream);
}

void flash_dq_finish(const FlashParams& P, DType dt, const float* dq_acc, void* dqkv, cudaStream_t stream) {
    with_half_type(dt, [&](auto tag) {
        using T = decltype(tag);
        with_head_dim(P.hn, [&](auto hn) {
            constexpr int HN = decltype(hn)::value;
            flash_dq_store<HN, T><<<grid_for(P.s * P.pairs * HN / 8), kThreads, 0, stream>>>(P, dq_acc,
                                                                                           static_cast<T*>(dqkv));
        });
    });
}

}  // namespace gpt::cuda
