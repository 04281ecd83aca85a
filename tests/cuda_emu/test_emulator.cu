// The CUDA emulator's own checks (built only with -DGPT_CUDA_EMU=ON): the errors it promises
// in docs/cuda-emulator.md surface as a GPU would report them, and warp shuffles, block
// barriers and dynamic shared memory behave as CUDA defines them, and the sm_80 PTX
// (mma.sync, ldmatrix, cp.async) follows the ISA's fragment layouts and completion rules.
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <gpt_emu/ptx.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/half.hpp"

namespace {

// Thread i writes dynamic shared memory element i + shift.
__global__ void shifted_smem_store_kernel(int shift) {
    extern __shared__ float dyn[];
    dyn[threadIdx.x + shift] = 1.0f;
}

// Thread i writes out[i + shift]: with shift > 0 the last threads write past the end.
__global__ void shifted_store_kernel(float* out, int shift) { out[threadIdx.x + shift] = 1.0f; }

// Sum over the block through shared memory and a butterfly of shuffles.
__global__ void block_sum_kernel(const float* x, float* out) {
    __shared__ float partial[32];
    float v = x[blockIdx.x * blockDim.x + threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.0f;
        for (unsigned w = 0; w < blockDim.x / 32; ++w) s += partial[w];
        out[blockIdx.x] = s;
    }
}

// Lanes from `live` on return, the rest shuffle with `mask`.
__global__ void partial_shuffle_kernel(float* out, unsigned mask, unsigned live) {
    if (threadIdx.x >= live) return;
    float v = static_cast<float>(threadIdx.x);
    v += __shfl_xor_sync(mask, v, 1);
    out[threadIdx.x] = v;
}

// Declared for at most 64 threads per block.
__global__ void __launch_bounds__(64) bounded_kernel(float* out) { out[threadIdx.x] = 1.0f; }

// Block 0 (or every block, with write_all) fills static shared memory; all read it back.
__global__ void static_smem_kernel(float* out, int write_all) {
    __shared__ float s[32];
    if (blockIdx.x == 0 || write_all) s[threadIdx.x] = 1.0f;
    __syncthreads();
    out[blockIdx.x * 32 + threadIdx.x] = s[threadIdx.x];
}

// Half of warp 0 waits at the block barrier, the other half at a warp barrier: neither can
// complete (a hang on a GPU).
__global__ void divergent_barrier_kernel(float* out) {
    if (threadIdx.x < 16) {
        __syncthreads();
        out[threadIdx.x] = 1.0f;
    } else {
        __syncwarp();
    }
}

// Threads that returned early no longer count at later barriers (sm_70+).
__global__ void early_exit_kernel(float* out) {
    if (threadIdx.x >= 40) return;
    __syncthreads();
    out[threadIdx.x] = static_cast<float>(threadIdx.x);
}

__global__ void dynamic_smem_kernel(float* out) {
    extern __shared__ __align__(16) unsigned char smem[];
    auto* f = reinterpret_cast<float*>(smem);
    out[threadIdx.x] = f[threadIdx.x];  // never written: the emulator's NaN fill
}

// mma.sync.m16n8k16 on row-major A (16x16), B (16x8, k x n) and C (16x8); each lane builds
// its fragments from the PTX layout (g = lane / 4, t = lane % 4) and stores its D share.
__global__ void mma_kernel(const std::uint16_t* a, const std::uint16_t* b, const float* c, float* d, bool bf16) {
    const int lane = static_cast<int>(threadIdx.x), g = lane / 4, t = lane % 4;
    auto pair = [](std::uint16_t lo, std::uint16_t hi) { return lo | static_cast<std::uint32_t>(hi) << 16; };
    auto A = [&](int r, int k) { return pair(a[r * 16 + k], a[r * 16 + k + 1]); };
    auto B = [&](int k, int n) { return pair(b[k * 8 + n], b[(k + 1) * 8 + n]); };
    const std::uint32_t ra[4] = {A(g, 2 * t), A(g + 8, 2 * t), A(g, 2 * t + 8), A(g + 8, 2 * t + 8)};
    const std::uint32_t rb[2] = {B(2 * t, g), B(2 * t + 8, g)};
    const int at[4] = {g * 8 + 2 * t, g * 8 + 2 * t + 1, (g + 8) * 8 + 2 * t, (g + 8) * 8 + 2 * t + 1};
    float acc[4];
    for (int i = 0; i < 4; ++i) acc[i] = c[at[i]];
    gpt_emu::mma_m16n8k16(acc, ra, rb, bf16);
    for (int i = 0; i < 4; ++i) d[at[i]] = acc[i];
}

// Where ldmatrix_kernel's matrix m, row r starts, in 16-bit elements: rows 48 bytes apart,
// matrices in reverse order, so a gather that ignored the lanes' addresses would show.
int ldm_offset(int m, int r) { return ((3 - m) * 8 + r) * 24 + 8; }

// Each lane's ldmatrix .x4, .x4.trans and .x2 registers (10 per lane) from a shared tile whose
// every element holds its own index; `bad_lane` >= 0 misaligns that lane's .x4 address.
__global__ void ldmatrix_kernel(std::uint32_t* out, int bad_lane) {
    __shared__ __align__(16) std::uint16_t tile[32 * 24];
    const int lane = static_cast<int>(threadIdx.x);
    for (int i = lane; i < 32 * 24; i += 32) tile[i] = static_cast<std::uint16_t>(i);
    __syncwarp();
    const std::uint16_t* row = tile + ldm_offset(lane / 8, lane % 8);
    std::uint32_t r[10];
    gpt_emu::ldmatrix(r, 4, false, lane == bad_lane ? row + 1 : row);
    gpt_emu::ldmatrix(r + 4, 4, true, row);
    // .x2 uses lanes 0-15 only: the others' (misaligned) addresses must not matter.
    gpt_emu::ldmatrix(r + 8, 2, false, lane < 16 ? row : row + 1);
    for (int i = 0; i < 10; ++i) out[lane * 10 + i] = r[i];
}

// cp.async from src (4 floats per thread) into shared memory: group 0 copies 16 bytes to s0;
// group 1 copies 16 bytes to s1, zero-fills s2, and copies 4 of 16 bytes plus 8 of 8 bytes
// to s3. Each thread snapshots its own destinations (16 floats) before any wait and after
// the __syncthreads that follows the commits, after wait(1), and after wait(0).
__global__ void cp_async_kernel(const float* src, float* out) {
    __shared__ __align__(16) float s[4][128];
    const int t = static_cast<int>(threadIdx.x);
    for (int k = 0; k < 4; ++k)
        for (int i = 0; i < 4; ++i) s[k][4 * t + i] = -1.0f;
    gpt_emu::cp_async(&s[0][4 * t], src + 4 * t, 16, 16);
    gpt_emu::cp_async_commit();
    gpt_emu::cp_async(&s[1][4 * t], src + 128 + 4 * t, 16, 16);
    gpt_emu::cp_async(&s[2][4 * t], src + 4 * t, 16, 0);
    gpt_emu::cp_async(&s[3][4 * t], src + 4 * t, 16, 4);
    gpt_emu::cp_async(&s[3][4 * t + 2], src + 4 * t + 2, 8, 8);
    gpt_emu::cp_async_commit();
    __syncthreads();  // a barrier does not complete copies
    auto snapshot = [&](int when) {
        for (int k = 0; k < 4; ++k)
            for (int i = 0; i < 4; ++i) out[(when * 32 + t) * 16 + 4 * k + i] = s[k][4 * t + i];
    };
    snapshot(0);
    gpt_emu::cp_async_wait(1);
    snapshot(1);
    gpt_emu::cp_async_wait(0);
    snapshot(2);
}

__global__ void cp_async_misaligned_kernel(const float* src) {
    __shared__ __align__(16) float s[8];
    gpt_emu::cp_async(s + 1, src, 16, 16);
}

template <typename T>
struct Buffer {
    T* p = nullptr;
    explicit Buffer(const std::vector<T>& h) {
        EXPECT_EQ(cudaMalloc(&p, h.size() * sizeof(T)), cudaSuccess);
        EXPECT_EQ(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    }
    ~Buffer() { cudaFree(p); }
    std::vector<T> get(std::size_t n) const {
        std::vector<T> h(n);
        EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
        return h;
    }
};

struct Device {
    float* p = nullptr;
    explicit Device(std::size_t n) { EXPECT_EQ(cudaMalloc(&p, n * sizeof(float)), cudaSuccess); }
    ~Device() { cudaFree(p); }
    std::vector<float> get(std::size_t n) const {
        std::vector<float> h(n);
        EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
        return h;
    }
};

// Block b writes partial[b] = b + 1, then one block sums the partials into *out: the
// highest-index block (wrong: CUDA runs blocks in no promised order), or the block that
// takes the last ticket of an atomic counter (right in every order).
__global__ void last_block_sum_kernel(float* partial, unsigned* tickets, float* out, bool ticketed) {
    if (threadIdx.x != 0) return;
    partial[blockIdx.x] = static_cast<float>(blockIdx.x + 1);
    const bool last = ticketed ? atomicAdd(tickets, 1u) == gridDim.x - 1 : blockIdx.x == gridDim.x - 1;
    if (!last) return;
    float s = 0.0f;
    for (unsigned b = 0; b < gridDim.x; ++b) s += partial[b];
    *out = s;
}

// Kernels are stream work that runs when something forces it (tests/cuda_emu/runtime.cpp):
// a launch reports a bad configuration at once, a failure while running at the next
// synchronisation, as on a GPU. This is both, and clears the error.
cudaError_t launch_result() {
    const cudaError_t sync = cudaDeviceSynchronize();
    const cudaError_t last = cudaGetLastError();
    return last != cudaSuccess ? last : sync;
}

TEST(CudaEmulator, ShufflesAndBarriersSumABlock) {
    const int blocks = 3, threads = 128;
    std::vector<float> x(blocks * threads);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7);
    Device dx(x.size()), dout(blocks);
    ASSERT_EQ(cudaMemcpy(dx.p, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    block_sum_kernel<<<blocks, threads>>>(dx.p, dout.p);
    ASSERT_EQ(launch_result(), cudaSuccess);
    const std::vector<float> out = dout.get(blocks);
    for (int b = 0; b < blocks; ++b) {
        float want = 0.0f;
        for (int t = 0; t < threads; ++t) want += x[b * threads + t];
        EXPECT_EQ(out[b], want) << "block " << b;
    }
}

TEST(CudaEmulator, DivergentBarrierFailsTheLaunchInsteadOfHanging) {
    Device d(64);
    divergent_barrier_kernel<<<1, 64>>>(d.p);
    const cudaError_t err = launch_result();
    EXPECT_EQ(err, cudaErrorLaunchFailure);
    EXPECT_NE(std::string(cudaGetErrorString(err)).find("barrier deadlock"), std::string::npos)
        << cudaGetErrorString(err);
    EXPECT_EQ(launch_result(), cudaSuccess);  // reading the error clears it
}

TEST(CudaEmulator, ExitedThreadsDoNotHoldBarriers) {
    Device d(64);
    ASSERT_EQ(cudaMemset(d.p, 0, 64 * sizeof(float)), cudaSuccess);
    early_exit_kernel<<<1, 64>>>(d.p);
    ASSERT_EQ(launch_result(), cudaSuccess);
    const std::vector<float> out = d.get(64);
    EXPECT_EQ(out[39], 39.0f);
    EXPECT_EQ(out[40], 0.0f);
}

TEST(CudaEmulator, ShuffleMaskMustNameOnlyLanesTakingPart) {
    Device d(32);
    partial_shuffle_kernel<<<1, 32>>>(d.p, 0x0000ffffu, 16);  // the mask names the live lanes
    ASSERT_EQ(launch_result(), cudaSuccess);
    EXPECT_EQ(d.get(32)[0], 1.0f);
    partial_shuffle_kernel<<<1, 32>>>(d.p, 0xffffffffu, 16);  // names 16 lanes that returned
    cudaError_t err = launch_result();
    EXPECT_EQ(err, cudaErrorLaunchFailure);
    EXPECT_NE(std::string(cudaGetErrorString(err)).find("__shfl_*_sync(0xffffffff) in warp 0: the mask names lane 16"),
              std::string::npos) << cudaGetErrorString(err);
    partial_shuffle_kernel<<<1, 16>>>(d.p, 0xffffffffu, 16);  // a partial warp, full mask
    EXPECT_EQ(launch_result(), cudaErrorLaunchFailure);
    partial_shuffle_kernel<<<1, 32>>>(d.p, 0x0000fffeu, 16);  // lane 0 not in its own mask
    err = launch_result();
    EXPECT_EQ(err, cudaErrorLaunchFailure);
    EXPECT_NE(std::string(cudaGetErrorString(err)).find("lane 0 is not in its own mask"), std::string::npos)
        << cudaGetErrorString(err);
}

TEST(CudaEmulator, StaticSharedMemoryStartsAsGarbageInEveryBlock) {
    Device d(64);
    static_smem_kernel<<<2, 32>>>(d.p, 1);
    ASSERT_EQ(launch_result(), cudaSuccess);
    for (float v : d.get(64)) EXPECT_EQ(v, 1.0f);
    // Block 1 reads what it never wrote: NaN, not block 0's values nor zeros.
    static_smem_kernel<<<2, 32>>>(d.p, 0);
    ASSERT_EQ(launch_result(), cudaSuccess);
    const std::vector<float> out = d.get(64);
    EXPECT_EQ(out[0], 1.0f);
    for (int i = 32; i < 64; ++i) EXPECT_TRUE(std::isnan(out[i])) << i;
}

TEST(CudaEmulator, BlockBeyondTheLaunchBoundsFailsTheLaunch) {
    Device d(128);
    bounded_kernel<<<1, 64>>>(d.p);
    ASSERT_EQ(launch_result(), cudaSuccess);
    bounded_kernel<<<1, 128>>>(d.p);
    const cudaError_t err = launch_result();
    EXPECT_EQ(err, cudaErrorLaunchFailure);
    EXPECT_NE(std::string(cudaGetErrorString(err)).find("block of 128 threads exceeds the kernel's __launch_bounds__(64)"),
              std::string::npos) << cudaGetErrorString(err);
}

TEST(CudaEmulator, KernelPointerArgumentsMustBeDeviceMemory) {
    std::vector<float> host(32);
    shifted_store_kernel<<<1, 30>>>(host.data(), 0);
    cudaError_t err = launch_result();
    EXPECT_EQ(err, cudaErrorInvalidValue);
    EXPECT_NE(std::string(cudaGetErrorString(err)).find("kernel argument 0"), std::string::npos)
        << cudaGetErrorString(err);
    EXPECT_NE(std::string(cudaGetErrorString(err)).find("not device memory"), std::string::npos);
    float* freed = nullptr;
    ASSERT_EQ(cudaMalloc(&freed, 4096), cudaSuccess);
    ASSERT_EQ(cudaFree(freed), cudaSuccess);
    shifted_store_kernel<<<1, 30>>>(freed + 1, 0);
    err = launch_result();
    EXPECT_EQ(err, cudaErrorInvalidValue);
    EXPECT_NE(std::string(cudaGetErrorString(err)).find("outside every live allocation"), std::string::npos)
        << cudaGetErrorString(err);
}

TEST(CudaEmulator, LaunchConfigurationAndSharedMemoryLimits) {
    Device d(1024);
    block_sum_kernel<<<1, 2048>>>(d.p, d.p);  // more than 1024 threads per block
    EXPECT_EQ(launch_result(), cudaErrorInvalidConfiguration);
    const std::size_t big = 64 * 1024;  // above the 48 KiB default
    dynamic_smem_kernel<<<1, 32, big>>>(d.p);
    EXPECT_EQ(launch_result(), cudaErrorInvalidValue);
    ASSERT_EQ(cudaFuncSetAttribute(dynamic_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(big)), cudaSuccess);
    dynamic_smem_kernel<<<1, 32, big>>>(d.p);
    ASSERT_EQ(launch_result(), cudaSuccess);
    for (float v : d.get(32)) EXPECT_TRUE(std::isnan(v)) << "unwritten shared memory reads as NaN";
    EXPECT_EQ(cudaFuncSetAttribute(dynamic_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   1 << 20), cudaErrorInvalidValue);  // beyond sm_80's opt-in
}

TEST(CudaEmulator, CopiesMustMatchWhereThePointersLive) {
    Device d(16);
    std::vector<float> h(128, 1.0f);
    EXPECT_EQ(cudaMemcpy(h.data(), h.data() + 8, 8 * sizeof(float), cudaMemcpyHostToDevice),
              cudaErrorInvalidValue);  // the destination is host memory
    EXPECT_EQ(cudaMemcpy(d.p, h.data(), 17 * sizeof(float), cudaMemcpyHostToDevice),
              cudaErrorInvalidValue);  // past the end of the allocation, by one element
    EXPECT_EQ(cudaMemcpy(d.p, h.data(), 16 * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    float x = 0.0f;
    EXPECT_EQ(cudaFree(&x), cudaErrorInvalidDevicePointer);
    (void)cudaGetLastError();  // failed calls also set the sticky error; later tests check theirs
}

TEST(CudaEmulator, KernelWritingPastTheEndOfABufferFailsTheLaunch) {
    Device d(30);  // 120 bytes: the red zone starts right after them, not at cudaMalloc's 256
    shifted_store_kernel<<<1, 30>>>(d.p, 0);
    ASSERT_EQ(launch_result(), cudaSuccess);
    shifted_store_kernel<<<1, 30>>>(d.p, 2);
    const cudaError_t err = launch_result();
    EXPECT_EQ(err, cudaErrorLaunchFailure);
    const std::string msg = cudaGetErrorString(err);
    EXPECT_NE(msg.find("kernel wrote out of bounds: bytes 0..7 past the end of the 120-byte allocation"),
              std::string::npos) << msg;
    shifted_store_kernel<<<1, 30>>>(d.p, 0);  // reported once: the zone was repaired
    EXPECT_EQ(launch_result(), cudaSuccess);
}

TEST(CudaEmulator, KernelWritingPastItsDynamicSharedMemoryFailsTheLaunch) {
    shifted_smem_store_kernel<<<2, 32, 32 * sizeof(float)>>>(0);
    ASSERT_EQ(launch_result(), cudaSuccess);
    shifted_smem_store_kernel<<<2, 32, 32 * sizeof(float)>>>(1);
    const cudaError_t err = launch_result();
    EXPECT_EQ(err, cudaErrorLaunchFailure);
    const std::string msg = cudaGetErrorString(err);
    // Whichever block runs first under the schedule (BlockOrderFollowsTheSchedule) reports it.
    EXPECT_NE(msg.find("byte 0 past the end of its 128 bytes of dynamic shared memory (block "),
              std::string::npos) << msg;
}

TEST(CudaEmulatorDeathTest, HostDereferenceOfDeviceMemoryFaultsWithAMessage) {
    Device d(4);
    EXPECT_DEATH({ volatile float v = d.p[0]; (void)v; }, "host code accessed emulated device memory");
}

void check_mma(bool bf16) {
    std::mt19937 rng(bf16 ? 2 : 1);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    auto bits = [&](float v) { return bf16 ? gpt::float_to_bf16_bits(v) : gpt::float_to_half_bits(v); };
    auto value = [&](std::uint16_t h) { return bf16 ? gpt::bf16_bits_to_float(h) : gpt::half_bits_to_float(h); };
    std::vector<std::uint16_t> a(16 * 16), b(16 * 8);
    std::vector<float> c(16 * 8);
    for (auto& x : a) x = bits(u(rng));
    for (auto& x : b) x = bits(u(rng));
    for (auto& x : c) x = u(rng);
    Buffer<std::uint16_t> da(a), db(b);
    Buffer<float> dc(c), dd(std::vector<float>(16 * 8, 0.0f));
    mma_kernel<<<1, 32>>>(da.p, db.p, dc.p, dd.p, bf16);
    ASSERT_EQ(launch_result(), cudaSuccess);
    const std::vector<float> d = dd.get(16 * 8);
    for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 8; ++j) {
            double want = c[i * 8 + j], scale = std::fabs(want);
            for (int k = 0; k < 16; ++k) {
                const double p = double{value(a[i * 16 + k])} * value(b[k * 8 + j]);
                want += p;
                scale += std::fabs(p);
            }
            // fp32 accumulation: 16 roundings of at most 2^-24 of the running magnitude
            EXPECT_NEAR(d[i * 8 + j], want, 1e-6 * scale)
                << (bf16 ? "bf16" : "fp16") << " D(" << i << "," << j << ")";
        }
}

TEST(CudaEmulatorPtx, MmaM16N8K16MatchesAPlainProductInFp16AndBf16) {
    check_mma(false);
    check_mma(true);
}

TEST(CudaEmulatorPtx, MmaInAPartialWarpFailsTheLaunch) {
    Buffer<std::uint16_t> da(std::vector<std::uint16_t>(256)), db(std::vector<std::uint16_t>(128));
    Buffer<float> dc(std::vector<float>(128)), dd(std::vector<float>(128));
    mma_kernel<<<1, 16>>>(da.p, db.p, dc.p, dd.p, false);
    const cudaError_t err = launch_result();
    EXPECT_EQ(err, cudaErrorLaunchFailure);
    EXPECT_NE(std::string(cudaGetErrorString(err)).find("not all 32 lanes"), std::string::npos)
        << cudaGetErrorString(err);
}

TEST(CudaEmulatorPtx, LdmatrixFollowsTheFragmentLayout) {
    Buffer<std::uint32_t> dout(std::vector<std::uint32_t>(320, 0));
    ldmatrix_kernel<<<1, 32>>>(dout.p, -1);
    ASSERT_EQ(launch_result(), cudaSuccess);
    const std::vector<std::uint32_t> out = dout.get(320);
    auto at = [](int m, int r, int c) { return static_cast<std::uint32_t>(ldm_offset(m, r) + c); };
    for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, t = lane % 4;
        for (int m = 0; m < 4; ++m) {
            EXPECT_EQ(out[lane * 10 + m], at(m, g, 2 * t) | at(m, g, 2 * t + 1) << 16)
                << "x4 lane " << lane << " m " << m;
            EXPECT_EQ(out[lane * 10 + 4 + m], at(m, 2 * t, g) | at(m, 2 * t + 1, g) << 16)
                << "x4.trans lane " << lane << " m " << m;
            if (m < 2) {
                EXPECT_EQ(out[lane * 10 + 8 + m], at(m, g, 2 * t) | at(m, g, 2 * t + 1) << 16)
                    << "x2 lane " << lane << " m " << m;
            }
        }
    }
}

TEST(CudaEmulatorPtx, MisalignedLdmatrixAddressFailsTheLaunch) {
    Buffer<std::uint32_t> dout(std::vector<std::uint32_t>(320, 0));
    ldmatrix_kernel<<<1, 32>>>(dout.p, 5);
    const cudaError_t err = launch_result();
    EXPECT_EQ(err, cudaErrorLaunchFailure);
    const std::string msg = cudaGetErrorString(err);
    EXPECT_NE(msg.find("ldmatrix: lane 5's row address"), std::string::npos) << msg;
    EXPECT_NE(msg.find("is not 16-byte aligned"), std::string::npos) << msg;
}

// Under GPT_EMU_SCHEDULE=warps copies land when issued instead (the earliest legal time),
// so every snapshot sees them.
TEST(CudaEmulatorPtx, CpAsyncLandsOnlyAtTheWaitThatCoversItsGroup) {
    const char* order = std::getenv("GPT_EMU_SCHEDULE");
    const bool at_issue = order && std::string(order) == "warps";
    std::vector<float> src(256);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i + 1);
    Buffer<float> dsrc(src), dout(std::vector<float>(3 * 32 * 16, 0.0f));
    cp_async_kernel<<<1, 32>>>(dsrc.p, dout.p);
    ASSERT_EQ(launch_result(), cudaSuccess);
    const std::vector<float> out = dout.get(3 * 32 * 16);
    for (int t = 0; t < 32; ++t)
        for (int i = 0; i < 4; ++i) {
            auto seen = [&](int when, int k) { return out[(when * 32 + t) * 16 + 4 * k + i]; };
            const float g0 = src[4 * t + i], g1 = src[128 + 4 * t + i];
            const float s3 = i == 1 ? 0.0f : g0;  // 4 of 16 bytes (rest zero), then 8 bytes at +2
            const float landed[4] = {g0, g1, 0.0f, s3};
            for (int k = 0; k < 4; ++k)
                EXPECT_EQ(seen(0, k), at_issue ? landed[k] : -1.0f) << "before any wait: t " << t << " s" << k;
            EXPECT_EQ(seen(1, 0), g0) << "wait(1) lands group 0: t " << t;
            for (int k = 1; k < 4; ++k)
                EXPECT_EQ(seen(1, k), at_issue ? landed[k] : -1.0f) << "wait(1) keeps group 1: t " << t << " s" << k;
            EXPECT_EQ(seen(2, 0), g0) << t;
            EXPECT_EQ(seen(2, 1), g1) << "wait(0): t " << t;
            EXPECT_EQ(seen(2, 2), 0.0f) << "zero fill: t " << t;
            EXPECT_EQ(seen(2, 3), s3) << "partial source: t " << t << " i " << i;
        }
}

TEST(CudaEmulatorPtx, MisalignedCpAsyncFailsTheLaunch) {
    Buffer<float> dsrc(std::vector<float>(16, 1.0f));
    cp_async_misaligned_kernel<<<1, 32>>>(dsrc.p);
    const cudaError_t err = launch_result();
    EXPECT_EQ(err, cudaErrorLaunchFailure);
    EXPECT_NE(std::string(cudaGetErrorString(err)).find("cp.async: destination"), std::string::npos)
        << cudaGetErrorString(err);
}

// Blocks run in index order only under the default schedule; reverse runs them last to
// first and warps in a permutation that changes per launch, so a kernel that assumes the
// highest-index block runs last reads partials not yet written there.
TEST(CudaEmulator, BlockOrderFollowsTheSchedule) {
    const char* order = std::getenv("GPT_EMU_SCHEDULE");
    const bool in_order = !order || std::string(order) == "forward";
    const unsigned blocks = 37;
    const float want = blocks * (blocks + 1) / 2.0f;
    int wrong = 0;
    for (bool ticketed : {true, false})
        for (int launch = 0; launch < 3; ++launch) {
            Buffer<float> partial(std::vector<float>(blocks, 0.0f)), out(std::vector<float>(1, 0.0f));
            Buffer<unsigned> tickets(std::vector<unsigned>(1, 0u));
            last_block_sum_kernel<<<blocks, 32>>>(partial.p, tickets.p, out.p, ticketed);
            ASSERT_EQ(launch_result(), cudaSuccess);
            const float got = out.get(1)[0];
            if (ticketed)
                EXPECT_EQ(got, want) << "atomic ticket, launch " << launch;
            else
                wrong += got != want;
        }
    if (in_order)
        EXPECT_EQ(wrong, 0) << "blocks in index order";
    else
        EXPECT_GT(wrong, 0) << "under " << order << " the highest-index block ran last in every launch";
}

// Each block adds 1 to *counter: with an atomic, or by a read, a barrier and a write (a race
// between blocks: two blocks that both read before either writes lose an update).
__global__ void count_blocks_kernel(unsigned* counter, bool atomic) {
    if (atomic) {
        if (threadIdx.x == 0) atomicAdd(counter, 1u);
        return;
    }
    unsigned seen = 0;
    if (threadIdx.x == 0) seen = *counter;
    __syncthreads();
    if (threadIdx.x == 0) *counter = seen + 1;
}

// Under reverse and warps several blocks of a grid are alive at once, taking turns at
// barriers, shuffles and atomics: the racy count loses updates there, the atomic one never.
// Under forward (one block after another) the race goes unseen.
TEST(CudaEmulator, BlocksOfAGridInterleaveUnderReverseAndWarps) {
    const char* order = std::getenv("GPT_EMU_SCHEDULE");
    const bool interleaved = order && std::string(order) != "forward";
    const unsigned blocks = 23;
    for (bool atomic : {true, false}) {
        Buffer<unsigned> counter(std::vector<unsigned>(1, 0u));
        count_blocks_kernel<<<blocks, 64>>>(counter.p, atomic);
        ASSERT_EQ(launch_result(), cudaSuccess);
        const unsigned got = counter.get(1)[0];
        if (atomic || !interleaved)
            EXPECT_EQ(got, blocks) << (atomic ? "atomicAdd" : "one block at a time");
        else
            EXPECT_LT(got, blocks) << "under " << order << " no two blocks' read and write overlapped";
    }
}

// sm_90's atomicAdd(float2*, float2) (the sm90 attention backward's dQ): every thread of
// every block adds (1, 2) to p[0] and (t, -t) to p[1 + t % 3]; with `misaligned` one thread
// aims at an odd float, which the GPU faults on.
__global__ void float2_atomic_kernel(float2* p, bool misaligned) {
    atomicAdd(p, make_float2(1.0f, 2.0f));
    const float t = static_cast<float>(threadIdx.x);
    atomicAdd(p + 1 + threadIdx.x % 3, make_float2(t, -t));
    if (misaligned && blockIdx.x == 0 && threadIdx.x == 5)
        atomicAdd(reinterpret_cast<float2*>(reinterpret_cast<float*>(p) + 1), make_float2(1.0f, 1.0f));
}

// Each component adds atomically (no update lost when blocks interleave, both components
// added once: integers, exact in fp32); a misaligned address fails the launch.
TEST(CudaEmulator, Float2AtomicAddAddsEachComponent) {
    const unsigned blocks = 7, threads = 64;
    Buffer<float2> p(std::vector<float2>(4, make_float2(0.0f, 0.0f)));
    float2_atomic_kernel<<<blocks, threads>>>(p.p, false);
    ASSERT_EQ(launch_result(), cudaSuccess);
    const std::vector<float2> got = p.get(4);
    EXPECT_EQ(got[0].x, static_cast<float>(blocks * threads));
    EXPECT_EQ(got[0].y, static_cast<float>(2 * blocks * threads));
    for (unsigned r = 0; r < 3; ++r) {
        float sum = 0.0f;
        for (unsigned t = r; t < threads; t += 3) sum += static_cast<float>(t);
        EXPECT_EQ(got[1 + r].x, blocks * sum) << r;
        EXPECT_EQ(got[1 + r].y, -(blocks * sum)) << r;
    }
    float2_atomic_kernel<<<1, 32>>>(p.p, true);
    const cudaError_t err = launch_result();
    EXPECT_EQ(err, cudaErrorLaunchFailure);
    EXPECT_NE(std::string(cudaGetErrorString(err)).find("not 8-byte aligned"), std::string::npos)
        << cudaGetErrorString(err);
}

// y[i] = x[i] (a consumer) and x[i] = v (a producer), one block.
__global__ void copy_kernel(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x]; }
__global__ void fill_kernel(float* x, float v) { x[threadIdx.x] = v; }

// Work is deferred per stream: a consumer on one stream that does not wait (by event) for
// its producer on another runs first when only its own stream is synchronised, and reads
// the old bytes, as a GPU running the two streams side by side may; with the wait it sees
// the producer's. Run at issue, as the emulator used to, both would read 2.
TEST(CudaEmulatorStreams, AMissingEventWaitReadsStaleBytes) {
    for (bool wait : {true, false}) {
        cudaStream_t producer = nullptr, consumer = nullptr;
        ASSERT_EQ(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), cudaSuccess);
        ASSERT_EQ(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), cudaSuccess);
        cudaEvent_t done = nullptr;
        ASSERT_EQ(cudaEventCreate(&done), cudaSuccess);
        Buffer<float> x(std::vector<float>(32, 1.0f)), y(std::vector<float>(32, 0.0f));
        fill_kernel<<<1, 32, 0, producer>>>(x.p, 2.0f);
        ASSERT_EQ(cudaEventRecord(done, producer), cudaSuccess);
        if (wait) ASSERT_EQ(cudaStreamWaitEvent(consumer, done, 0), cudaSuccess);
        copy_kernel<<<1, 32, 0, consumer>>>(x.p, y.p);
        ASSERT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
        EXPECT_EQ(y.get(32)[5], wait ? 2.0f : 1.0f) << (wait ? "with" : "without") << " the event wait";
        ASSERT_EQ(cudaStreamSynchronize(producer), cudaSuccess);
        EXPECT_EQ(x.get(32)[5], 2.0f);
        cudaEventDestroy(done);
        cudaStreamDestroy(producer);
        cudaStreamDestroy(consumer);
    }
}

// The legacy default stream waits for the blocking streams (cudaStreamCreate) and they for
// it; a non-blocking stream is ordered with neither. Copies, memsets and kernels alike.
TEST(CudaEmulatorStreams, TheLegacyStreamSynchronisesWithBlockingStreamsOnly) {
    for (bool blocking : {true, false}) {
        cudaStream_t s = nullptr;
        ASSERT_EQ(cudaStreamCreateWithFlags(&s, blocking ? cudaStreamDefault : cudaStreamNonBlocking), cudaSuccess);
        Buffer<float> x(std::vector<float>(32, 1.0f)), y(std::vector<float>(32, 0.0f)),
            z(std::vector<float>(32, 0.0f));
        fill_kernel<<<1, 32, 0, s>>>(x.p, 2.0f);
        copy_kernel<<<1, 32>>>(x.p, y.p);  // legacy stream: after the fill if s is blocking
        ASSERT_EQ(cudaMemsetAsync(x.p, 0, 32 * sizeof(float), nullptr), cudaSuccess);
        copy_kernel<<<1, 32, 0, s>>>(x.p, z.p);  // after the memset if s is blocking
        ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
        EXPECT_EQ(y.get(32)[3], blocking ? 2.0f : 1.0f) << (blocking ? "blocking" : "non-blocking");
        ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
        EXPECT_EQ(z.get(32)[3], blocking ? 0.0f : 2.0f) << (blocking ? "blocking" : "non-blocking");
        cudaStreamDestroy(s);
    }
}

// An asynchronous copy from host memory reads it when issued (staged, as CUDA does for
// pageable memory) and lands in stream order; a blocking cudaMemcpy waits for the work
// before it; a kernel's failure shows at the synchronisation, not at the launch.
TEST(CudaEmulatorStreams, CopiesAndFailuresFollowStreamOrder) {
    cudaStream_t s = nullptr;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
    Buffer<float> x(std::vector<float>(32, 1.0f)), y(std::vector<float>(32, 0.0f));
    std::vector<float> h(32, 3.0f);
    fill_kernel<<<1, 32, 0, s>>>(x.p, 2.0f);
    ASSERT_EQ(cudaMemcpyAsync(x.p, h.data(), 32 * sizeof(float), cudaMemcpyHostToDevice, s), cudaSuccess);
    h.assign(32, 4.0f);  // after the issue: not what lands
    copy_kernel<<<1, 32, 0, s>>>(x.p, y.p);
    EXPECT_EQ(y.get(32)[7], 3.0f);
    Device d(30);
    shifted_store_kernel<<<1, 30, 0, s>>>(d.p, 2);  // writes past the end: fails when it runs
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "a launch reports only its configuration";
    EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorLaunchFailure);
    EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess) << "reported once";
    cudaStreamDestroy(s);
}

}  // namespace
