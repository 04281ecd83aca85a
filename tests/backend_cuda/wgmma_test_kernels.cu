// The wgmma layout test's kernel (see wgmma_test_kernels.hpp). Its tile writers are its own
// formulation of the PTX ISA's layouts (8x8 core matrices; swizzled rows of S bytes whose
// 16-byte chunks are XORed with the row's bits, as TMA writes them), independent of the
// emulator's descriptor reader (tests/cuda_emu/wgmma.cpp, written from the CuTe form), so a
// misreading on either side shows, and the GPU arbitrates.
#include "wgmma_test_kernels.hpp"

#include <cuda_runtime.h>

#include <sstream>
#include <stdexcept>

#include "backend/cuda/tma_sm90.cuh"
#include "backend/cuda/wgmma_sm90.cuh"

namespace gpt::test::wgmma {

namespace {

namespace w = ::gpt::cuda::wgmma;
namespace tma = ::gpt::cuda::tma;

constexpr int kTileA = 64 * kDepth * 2;       // one warpgroup's A tile, bytes
// Two A tiles, a third (the chain's K), B of at most n = 128, the chain's mbarrier, and the
// alignment slack.
constexpr int kSmem = 3 * kTileA + kDepth * 128 * 2 + 16 + 1024;

__host__ __device__ w::Swizzle swizzle_mode(int s) {
    return s == 128 ? w::Swizzle::B128 : s == 64 ? w::Swizzle::B64 : s == 32 ? w::Swizzle::B32 : w::Swizzle::None;
}
// The 16-byte chunk a swizzled row's chunk c lands in: the row's bits above the row size.
__device__ int swizzled_chunk(int c, int row, int s) {
    const int phase = s == 128 ? row % 8 : s == 64 ? row / 2 % 4 : row / 4 % 2;
    return c ^ phase;
}
// Element (row, k) of a K-major tile of `rows` rows and kDepth columns: no swizzle, 8x8 core
// matrices of 128 bytes, the eight of a row group side by side (k / 8), row groups after one
// another; swizzled, columns of S bytes (S / 2 elements) of all rows, one after another.
__device__ int kmajor_offset(int row, int k, int rows, int s) {
    if (s == 0) return (row / 8 * (kDepth / 8) + k / 8) * 128 + row % 8 * 16 + k % 8 * 2;
    const int per_row = s / 2, col = k / per_row, kk = k % per_row;
    return col * rows * s + row * s + swizzled_chunk(kk / 8, row, s) * 16 + kk % 8 * 2;
}
// Element (mn, k) of an MN-major tile `cols` wide and kDepth rows of K: no swizzle, core
// matrices of 8 mn x 8 k, the cols / 8 of a k group side by side; swizzled, columns of
// S / 2 elements of mn over all kDepth rows, one after another.
__device__ int mnmajor_offset(int mn, int k, int cols, int s) {
    if (s == 0) return (k / 8 * (cols / 8) + mn / 8) * 128 + k % 8 * 16 + mn % 8 * 2;
    const int per_row = s / 2, col = mn / per_row, m = mn % per_row;
    return col * kDepth * s + k * s + swizzled_chunk(m / 8, k, s) * 16 + m % 8 * 2;
}
// Descriptors of k step `step` (16 deep) of those tiles.
__device__ std::uint64_t kmajor_desc(const unsigned char* tile, int step, int rows, int s) {
    if (s == 0) return w::make_desc(tile + step * 256, 128, 1024, w::Swizzle::None);
    const int k0 = 16 * step, per_row = s / 2;
    return w::make_desc(tile + k0 / per_row * rows * s + k0 % per_row * 2, 16, 8 * s, swizzle_mode(s));
}
__device__ std::uint64_t mnmajor_desc(const unsigned char* tile, int step, int cols, int s) {
    if (s == 0) return w::make_desc(tile + step * 2 * (cols / 8) * 128, (cols / 8) * 128, 128, w::Swizzle::None);
    return w::make_desc(tile + step * 16 * s, kDepth * s, 8 * s, swizzle_mode(s));
}

// Register i of a thread's accumulator fragment: (row, column) within the warpgroup's 64 x N.
__device__ int frag_row(int t, int i) { return t / 32 * 16 + t % 32 / 4 + 8 * (i / 2 % 2); }
__device__ int frag_col(int t, int i) { return 8 * (i / 4) + 2 * (t % 4) + i % 2; }

template <int N, typename T, int kA, bool kBmn>
__global__ void __launch_bounds__(256) wgmma_gemm_kernel(const std::uint16_t* a, const std::uint16_t* b, const float* c,
                                                         float* d, int swz, int accumulate) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char* smem = smem_raw + (1024 - w::smem_address(smem_raw) % 1024) % 1024;
    unsigned char* sa = smem;
    unsigned char* sb = smem + 2 * kTileA;
    for (int i = threadIdx.x; i < kRows * kDepth; i += blockDim.x) {
        const int row = i / kDepth, k = i % kDepth;
        const int off = kA == 1 ? mnmajor_offset(row % 64, k, 64, swz) : kmajor_offset(row % 64, k, 64, swz);
        *reinterpret_cast<std::uint16_t*>(sa + row / 64 * kTileA + off) = a[i];
    }
    for (int i = threadIdx.x; i < kDepth * N; i += blockDim.x) {
        const int k = i / N, n = i % N;
        const int off = kBmn ? mnmajor_offset(n, k, N, swz) : kmajor_offset(n, k, N, swz);
        *reinterpret_cast<std::uint16_t*>(sb + off) = b[i];
    }
    w::fence_proxy_async_shared();
    __syncthreads();
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    const unsigned char* tile_a = sa + wg * kTileA;
    // A from registers: the four k steps' fragments, loaded before the first mma_async and
    // left alone until the wait (the instruction reads them asynchronously).
    std::uint32_t areg[4][4] = {};
    if constexpr (kA == 2) {
        const int r0 = 64 * wg + t / 32 * 16 + t % 32 / 4, q = t % 4;
        for (int s = 0; s < 4; ++s)
            for (int j = 0; j < 4; ++j) {
                const int row = r0 + 8 * (j % 2), k = 16 * s + 2 * q + 8 * (j / 2);
                areg[s][j] = a[row * kDepth + k] | static_cast<std::uint32_t>(a[row * kDepth + k + 1]) << 16;
            }
    }
    float acc[N / 2];
    for (int i = 0; i < N / 2; ++i)  // C, or garbage that scale-d = 0 must ignore
        acc[i] = accumulate ? c[(64 * wg + frag_row(t, i)) * N + frag_col(t, i)] : 12345.0f;
    w::fence();
    for (int s = 0; s < 4; ++s) {
        const std::uint64_t db = kBmn ? mnmajor_desc(sb, s, N, swz) : kmajor_desc(sb, s, N, swz);
        const bool acc_in = s > 0 || accumulate;
        if constexpr (kA == 2) {
            w::mma_rs<N, T, kBmn>(acc, areg[s], db, acc_in);
        } else {
            const std::uint64_t da = kA == 1 ? mnmajor_desc(tile_a, s, 64, swz) : kmajor_desc(tile_a, s, 64, swz);
            w::mma_ss<N, T, kA == 1, kBmn>(acc, da, db, acc_in);
        }
        if (s == 1) w::commit_group();  // two groups: the first two k steps, the last two
    }
    w::commit_group();
    w::wait_group<1>();
    w::wait_group<0>();
    w::fence_operand(acc);
    for (int s = 0; s < 4; ++s) w::fence_operand(areg[s]);
    for (int i = 0; i < N / 2; ++i) d[(64 * wg + frag_row(t, i)) * N + frag_col(t, i)] = acc[i];
}

// S = Q K^T (64 x 64 per warpgroup, four k steps), then O = P V with P = S in registers.
// With kTma the tiles come by TMA (128-byte swizzle, 64 x 64 boxes) on one mbarrier: Q and K
// in its phase 0, V, issued once S is done, in phase 1.
template <int N, typename T, bool kTma>
__global__ void __launch_bounds__(256) wgmma_chain_kernel(const std::uint16_t* q, const std::uint16_t* k,
                                                          const std::uint16_t* v, float* o, int swz,
                                                          const GPT_GRID_CONSTANT tma::TensorMap qmap,
                                                          const GPT_GRID_CONSTANT tma::TensorMap kmap,
                                                          const GPT_GRID_CONSTANT tma::TensorMap vmap) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    unsigned char* smem = smem_raw + (1024 - w::smem_address(smem_raw) % 1024) % 1024;
    unsigned char* sq = smem;                   // two 64 x kDepth tiles
    unsigned char* sk = smem + 2 * kTileA;      // 64 x kDepth
    unsigned char* sv = smem + 3 * kTileA;      // 64 (kv) x N
    auto* bar = reinterpret_cast<std::uint64_t*>(sv + kDepth * 128 * 2);
    if constexpr (kTma) {
        if (threadIdx.x == 0) {
            tma::mbarrier_init(bar, 1);
            tma::fence_mbarrier_init();
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            tma::mbarrier_arrive_expect_tx(bar, 3 * kTileA);
            tma::load_2d(sq, &qmap, bar, 0, 0);
            tma::load_2d(sq + kTileA, &qmap, bar, 0, 64);
            tma::load_2d(sk, &kmap, bar, 0, 0);
        }
        tma::mbarrier_wait(bar, 0);
    } else {
        for (int i = threadIdx.x; i < kRows * kDepth; i += blockDim.x)
            *reinterpret_cast<std::uint16_t*>(sq + i / kDepth / 64 * kTileA +
                                              kmajor_offset(i / kDepth % 64, i % kDepth, 64, swz)) = q[i];
        for (int i = threadIdx.x; i < 64 * kDepth; i += blockDim.x)
            *reinterpret_cast<std::uint16_t*>(sk + kmajor_offset(i / kDepth, i % kDepth, 64, swz)) = k[i];
        for (int i = threadIdx.x; i < 64 * N; i += blockDim.x)
            *reinterpret_cast<std::uint16_t*>(sv + mnmajor_offset(i % N, i / N, N, swz)) = v[i];
        w::fence_proxy_async_shared();
        __syncthreads();
    }
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    float s[32];
    w::fence();
    for (int step = 0; step < 4; ++step)
        w::mma_ss<64, T>(s, kmajor_desc(sq + wg * kTileA, step, 64, swz), kmajor_desc(sk, step, 64, swz), step > 0);
    w::commit_group();
    w::wait_group<0>();
    w::fence_operand(s);
    if constexpr (kTma) {
        if (threadIdx.x == 0) {
            tma::mbarrier_arrive_expect_tx(bar, 64 * N * 2);
            for (int c = 0; c < N; c += 64) tma::load_2d(sv + c / 64 * kDepth * 128, &vmap, bar, c, 0);
        }
        tma::mbarrier_wait(bar, 1);
    }
    std::uint32_t p[4][4];
    for (int step = 0; step < 4; ++step) w::accumulators_to_a<T>(s, step, p[step]);
    float acc[N / 2];
    w::fence();
    for (int step = 0; step < 4; ++step) w::mma_rs<N, T, true>(acc, p[step], mnmajor_desc(sv, step, N, swz), step > 0);
    w::commit_group();
    w::wait_group<0>();
    w::fence_operand(acc);
    for (int step = 0; step < 4; ++step) w::fence_operand(p[step]);
    for (int i = 0; i < N / 2; ++i) o[(64 * wg + frag_row(t, i)) * N + frag_col(t, i)] = acc[i];
}

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

template <int N, typename T, int kA, bool kBmn>
void launch(const std::uint16_t* a, const std::uint16_t* b, const float* c, float* d, int swz, int accumulate) {
    auto* k = wgmma_gemm_kernel<N, T, kA, kBmn>;
    check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem), "cudaFuncSetAttribute");
    k<<<1, 256, kSmem>>>(a, b, c, d, swz, accumulate);
    check(cudaGetLastError(), "wgmma_gemm_kernel launch");
}
template <int N, typename T>
void launch_t(const Case& cs, const std::uint16_t* a, const std::uint16_t* b, const float* c, float* d) {
    const int s = cs.swizzle_bytes, acc = cs.accumulate ? 1 : 0;
    switch (cs.a) {
        case ASource::KMajor:
            return cs.b_mn_major ? launch<N, T, 0, true>(a, b, c, d, s, acc) : launch<N, T, 0, false>(a, b, c, d, s, acc);
        case ASource::MNMajor:
            return cs.b_mn_major ? launch<N, T, 1, true>(a, b, c, d, s, acc) : launch<N, T, 1, false>(a, b, c, d, s, acc);
        case ASource::Registers:
            return cs.b_mn_major ? launch<N, T, 2, true>(a, b, c, d, s, acc) : launch<N, T, 2, false>(a, b, c, d, s, acc);
    }
}

}  // namespace

template <int N, typename T>
void launch_chain(const std::uint16_t* q, const std::uint16_t* k, const std::uint16_t* v, float* o, int swz, bool use_tma) {
    tma::TensorMap qmap{}, kmap{}, vmap{};
    if (use_tma) {
        if (swz != 128) throw std::invalid_argument("wgmma chain test: TMA loads are 128-byte swizzled");
        check(tma::make_tensor_map_2d(&qmap, q, kRows, kDepth, kDepth * 2, 64, 64, 128), "make_tensor_map_2d(Q)");
        check(tma::make_tensor_map_2d(&kmap, k, 64, kDepth, kDepth * 2, 64, 64, 128), "make_tensor_map_2d(K)");
        check(tma::make_tensor_map_2d(&vmap, v, 64, N, N * 2, 64, 64, 128), "make_tensor_map_2d(V)");
    }
    auto* kern = use_tma ? wgmma_chain_kernel<N, T, true> : wgmma_chain_kernel<N, T, false>;
    check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem), "cudaFuncSetAttribute");
    kern<<<1, 256, kSmem>>>(q, k, v, o, swz, qmap, kmap, vmap);
    check(cudaGetLastError(), "wgmma_chain_kernel launch");
}

std::string describe(const Case& c) {
    std::ostringstream m;
    m << (c.bf16 ? "bf16" : "fp16") << " m64n" << c.n << "k16, swizzle " << c.swizzle_bytes << "B, A "
      << (c.a == ASource::KMajor ? "K-major" : c.a == ASource::MNMajor ? "M-major" : "in registers") << ", B "
      << (c.b_mn_major ? "N-major" : "K-major") << (c.accumulate ? ", D = A B + C" : ", D = A B (scale-d 0)");
    return m.str();
}

std::string unsupported_reason() {
#if defined(GPT_CUDA_EMU)
    return "";
#else
    int dev = 0;
    cudaDeviceProp p{};
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess)
        return "cannot query the device";
    if (p.major != 9 || p.minor != 0)
        return "wgmma needs an sm_90 GPU (this one is sm_" + std::to_string(p.major * 10 + p.minor) + ")";
    return "";
#endif
}

std::vector<float> run(const Case& cs, const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b,
                       const std::vector<float>& cmat) {
    const int n = cs.n;
    if ((n != 32 && n != 48 && n != 64 && n != 96 && n != 128) || a.size() != std::size_t{kRows} * kDepth ||
        b.size() != std::size_t(kDepth) * n || cmat.size() != std::size_t(kRows) * n)
        throw std::invalid_argument("wgmma test: bad case or operand sizes");
    std::uint16_t *da = nullptr, *db = nullptr;
    float *dc = nullptr, *dd = nullptr;
    check(cudaMalloc(&da, a.size() * 2), "cudaMalloc");
    check(cudaMalloc(&db, b.size() * 2), "cudaMalloc");
    check(cudaMalloc(&dc, cmat.size() * 4), "cudaMalloc");
    check(cudaMalloc(&dd, cmat.size() * 4), "cudaMalloc");
    std::vector<float> out(cmat.size());
    try {
        check(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
        check(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
        check(cudaMemcpy(dc, cmat.data(), cmat.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
        if (n == 32)
            cs.bf16 ? launch_t<32, __nv_bfloat16>(cs, da, db, dc, dd) : launch_t<32, __half>(cs, da, db, dc, dd);
        else if (n == 48)
            cs.bf16 ? launch_t<48, __nv_bfloat16>(cs, da, db, dc, dd) : launch_t<48, __half>(cs, da, db, dc, dd);
        else if (n == 64)
            cs.bf16 ? launch_t<64, __nv_bfloat16>(cs, da, db, dc, dd) : launch_t<64, __half>(cs, da, db, dc, dd);
        else if (n == 96)
            cs.bf16 ? launch_t<96, __nv_bfloat16>(cs, da, db, dc, dd) : launch_t<96, __half>(cs, da, db, dc, dd);
        else
            cs.bf16 ? launch_t<128, __nv_bfloat16>(cs, da, db, dc, dd) : launch_t<128, __half>(cs, da, db, dc, dd);
        check(cudaDeviceSynchronize(), "wgmma_gemm_kernel");
        check(cudaMemcpy(out.data(), dd, out.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    } catch (...) {
        cudaFree(da), cudaFree(db), cudaFree(dc), cudaFree(dd);
        throw;
    }
    cudaFree(da), cudaFree(db), cudaFree(dc), cudaFree(dd);
    return out;
}

std::vector<float> run_chain(bool bf16, int n, int swizzle_bytes, const std::vector<std::uint16_t>& q,
                             const std::vector<std::uint16_t>& k, const std::vector<std::uint16_t>& v, bool use_tma) {
    if ((n != 64 && n != 128) || q.size() != std::size_t{kRows} * kDepth || k.size() != std::size_t{64} * kDepth ||
        v.size() != std::size_t{64} * n)
        throw std::invalid_argument("wgmma chain test: bad shape or operand sizes");
    std::uint16_t *dq = nullptr, *dk = nullptr, *dv = nullptr;
    float* dout = nullptr;
    check(cudaMalloc(&dq, q.size() * 2), "cudaMalloc");
    check(cudaMalloc(&dk, k.size() * 2), "cudaMalloc");
    check(cudaMalloc(&dv, v.size() * 2), "cudaMalloc");
    check(cudaMalloc(&dout, std::size_t{kRows} * n * 4), "cudaMalloc");
    std::vector<float> out(std::size_t{kRows} * n);
    try {
        check(cudaMemcpy(dq, q.data(), q.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
        check(cudaMemcpy(dk, k.data(), k.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
        check(cudaMemcpy(dv, v.data(), v.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
        const int s = swizzle_bytes;
        if (n == 64)
            bf16 ? launch_chain<64, __nv_bfloat16>(dq, dk, dv, dout, s, use_tma)
                 : launch_chain<64, __half>(dq, dk, dv, dout, s, use_tma);
        else
            bf16 ? launch_chain<128, __nv_bfloat16>(dq, dk, dv, dout, s, use_tma)
                 : launch_chain<128, __half>(dq, dk, dv, dout, s, use_tma);
        check(cudaDeviceSynchronize(), "wgmma_chain_kernel");
        check(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    } catch (...) {
        cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dout);
        throw;
    }
    cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dout);
    return out;
}

}  // namespace gpt::test::wgmma
