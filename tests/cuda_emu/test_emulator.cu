// The CUDA emulator's own checks (built only with -DGPT_CUDA_EMU=ON): the errors it promises
// in docs/cuda-emulator.md surface as a GPU would report them, and warp shuffles, block
// barriers and dynamic shared memory behave as CUDA defines them.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace {

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

TEST(CudaEmulator, ShufflesAndBarriersSumABlock) {
    const int blocks = 3, threads = 128;
    std::vector<float> x(blocks * threads);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7);
    Device dx(x.size()), dout(blocks);
    ASSERT_EQ(cudaMemcpy(dx.p, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    block_sum_kernel<<<blocks, threads>>>(dx.p, dout.p);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
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
    const cudaError_t err = cudaGetLastError();
    EXPECT_EQ(err, cudaErrorLaunchFailure);
    EXPECT_NE(std::string(cudaGetErrorString(err)).find("barrier deadlock"), std::string::npos)
        << cudaGetErrorString(err);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // reading the error clears it
}

TEST(CudaEmulator, ExitedThreadsDoNotHoldBarriers) {
    Device d(64);
    ASSERT_EQ(cudaMemset(d.p, 0, 64 * sizeof(float)), cudaSuccess);
    early_exit_kernel<<<1, 64>>>(d.p);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    const std::vector<float> out = d.get(64);
    EXPECT_EQ(out[39], 39.0f);
    EXPECT_EQ(out[40], 0.0f);
}

TEST(CudaEmulator, LaunchConfigurationAndSharedMemoryLimits) {
    Device d(1024);
    block_sum_kernel<<<1, 2048>>>(d.p, d.p);  // more than 1024 threads per block
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
    const std::size_t big = 64 * 1024;  // above the 48 KiB default
    dynamic_smem_kernel<<<1, 32, big>>>(d.p);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
    ASSERT_EQ(cudaFuncSetAttribute(dynamic_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(big)), cudaSuccess);
    dynamic_smem_kernel<<<1, 32, big>>>(d.p);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    for (float v : d.get(32)) EXPECT_TRUE(std::isnan(v)) << "unwritten shared memory reads as NaN";
    EXPECT_EQ(cudaFuncSetAttribute(dynamic_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   1 << 20), cudaErrorInvalidValue);  // beyond sm_80's opt-in
}

TEST(CudaEmulator, CopiesMustMatchWhereThePointersLive) {
    Device d(16);
    std::vector<float> h(128, 1.0f);
    EXPECT_EQ(cudaMemcpy(h.data(), h.data() + 8, 8 * sizeof(float), cudaMemcpyHostToDevice),
              cudaErrorInvalidValue);  // the destination is host memory
    EXPECT_EQ(cudaMemcpy(d.p, h.data(), 128 * sizeof(float), cudaMemcpyHostToDevice),
              cudaErrorInvalidValue);  // past the end of the allocation (256 bytes, rounded)
    EXPECT_EQ(cudaMemcpy(d.p, h.data(), 16 * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    float x = 0.0f;
    EXPECT_EQ(cudaFree(&x), cudaErrorInvalidDevicePointer);
}

TEST(CudaEmulatorDeathTest, HostDereferenceOfDeviceMemoryFaultsWithAMessage) {
    Device d(4);
    EXPECT_DEATH({ volatile float v = d.p[0]; (void)v; }, "host code accessed emulated device memory");
}

}  // namespace
