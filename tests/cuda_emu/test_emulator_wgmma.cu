// The emulator's wgmma (tests/cuda_emu/wgmma.cpp) reports the misuses a GPU leaves undefined:
// accumulators read before their wait_group (NaN), a missing wgmma.fence, commit_group or
// wait_group, a warpgroup with threads missing, descriptors that differ between its threads,
// point outside dynamic shared memory or at a misaligned address, A registers changed
// while the instruction still reads them, shared operands other warps store without a
// barrier before the instruction, and a warp that never issues it. (Its layouts are checked against a host product,
// and on a GPU against the hardware, by test_cuda_wgmma.) Its TMA tile loads land swizzled,
// with zeros outside the tensor, and an mbarrier phase that can never complete, an
// uninitialised barrier and loads nobody waited for fail the launch. Its bulk reductions add
// shared memory into global memory, read their source at the wait (a store before it shows),
// and a missing wait, a misaligned address or a global source fail the launch. Named barriers order a
// producer warpgroup and a consumer warpgroup; counts that disagree or are never reached,
// arrivals left over when the block ends, and a setmaxnreg that not all of a warpgroup
// executes, fail the launch; a warpgroup's write after another warpgroup's product read
// without a barrier between is reported under GPT_EMU_SCHEDULE=warps.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/tma_sm90.cuh"
#include "backend/cuda/warp_specialization.cuh"
#include "backend/cuda/wgmma_sm90.cuh"

namespace {

namespace w = ::gpt::cuda::wgmma;

enum Misuse {
    kNone, kNoFence, kNoWait, kNoCommit, kMisaligned, kPastTheEnd, kNonUniform, kARegsChanged, kBadN,
    kStoresThenBarrier, kStoresNoBarrier, kWarpExits
};
constexpr int kSmemBytes = 4096;  // A (64x16) and B (16x64), fp16, no swizzle, 2 KiB each

// A and B all fp16 1.0, ready for the block's products (the stores fenced for wgmma's
// proxy and behind a barrier).
__device__ void fill_ones(std::uint16_t* h) {
    for (int i = threadIdx.x; i < kSmemBytes / 2; i += blockDim.x) h[i] = 0x3C00;
    w::fence_proxy_async_shared();
    __syncthreads();
}

// D = A B with all-ones operands (every element 16), reading D before and after the wait.
__global__ void wgmma_misuse_kernel(float* out, int misuse) {
    extern __shared__ __align__(1024) unsigned char smem[];
    auto* h = reinterpret_cast<std::uint16_t*>(smem);
    fill_ones(h);
    // Each warp writes its quarter of B (2.0), read by every warp's product: the products
    // may read them only after a barrier (without it, a warp that issues first reads the
    // others' quarters before they are stored).
    if (misuse == kStoresThenBarrier || misuse == kStoresNoBarrier) {
        for (int i = threadIdx.x % 32; i < 256; i += 32) h[1024 + 256 * (threadIdx.x / 32) + i] = 0x4000;
        w::fence_proxy_async_shared();
        if (misuse == kStoresThenBarrier) __syncthreads();
    }
    if (misuse == kWarpExits && threadIdx.x >= 96) return;
    float acc[32];
    for (float& v : acc) v = 0.0f;
    // K-major, no swizzle: core matrices 128 bytes apart along K (LBO), 8-row groups 256 (SBO).
    const std::uint64_t da = misuse == kPastTheEnd ? w::make_desc(smem + 3072, 128, 256, w::Swizzle::None)
                             : misuse == kMisaligned ? w::make_desc(smem + 8, 128, 256, w::Swizzle::None)
                                                     : w::make_desc(smem, 128, 256, w::Swizzle::None);
    std::uint64_t db = w::make_desc(smem + 2048, 128, 256, w::Swizzle::None);
    if (misuse == kNonUniform && threadIdx.x == 5) db = w::desc_add(db, 16);
    std::uint32_t a[4] = {0x3C003C00u, 0x3C003C00u, 0x3C003C00u, 0x3C003C00u};
    if (misuse != kNoFence) w::fence();
    if (misuse == kBadN) {  // the wrappers static_assert N; the emulator checks its callers too
        ::gpt_emu::wgmma_mma(acc, 12, false, da, nullptr, db, false, false, false);
    } else if (misuse == kARegsChanged) {
        w::mma_rs<64, __half>(acc, a, db, false);
        a[0] = 0;  // the instruction may still be reading it
    } else {
        w::mma_ss<64, __half>(acc, da, db, false);
    }
    if (misuse != kNoCommit) w::commit_group();
    out[threadIdx.x] = acc[0];  // still in flight
    if (misuse != kNoWait) w::wait_group<0>();
    w::fence_operand(acc);
    out[blockDim.x + threadIdx.x] = acc[0];
}

struct Out {
    float* p = nullptr;
    explicit Out(int n) { cudaMalloc(&p, n * sizeof(float)); }
    ~Out() { cudaFree(p); }
    std::vector<float> get(int n) const {
        std::vector<float> v(n);
        cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost);
        return v;
    }
};

// After a launch: its error message (the launch's or the synchronisation's), "" on success.
std::string launch_error() {
    const cudaError_t sync = cudaDeviceSynchronize();
    const cudaError_t last = cudaGetLastError();
    const cudaError_t err = last != cudaSuccess ? last : sync;
    return err != cudaSuccess ? cudaGetErrorString(err) : "";
}

// Runs launch(p), p a fresh device output of n floats: the launch's error message, or ""
// when it succeeded (and then the output in *out, if given).
template <typename F>
std::string run_into(int n, std::vector<float>* out, F&& launch) {
    Out d(n);
    launch(d.p);
    if (std::string e = launch_error(); !e.empty()) return e;
    if (out) *out = d.get(n);
    return "";
}

// Runs the kernel; the launch's error message, "" when it succeeded.
std::string run(int misuse, int threads, std::vector<float>* out = nullptr) {
    return run_into(2 * threads, out, [&](float* p) { wgmma_misuse_kernel<<<1, threads, kSmemBytes>>>(p, misuse); });
}

void expect_failure(int misuse, int threads, const std::string& what) {
    const std::string msg = run(misuse, threads);
    EXPECT_NE(msg.find(what), std::string::npos) << "misuse " << misuse << ": got \"" << msg << "\"";
}

TEST(CudaEmulatorWgmma, AccumulatorsReadBeforeTheirWaitAreNaN) {
    std::vector<float> out;
    ASSERT_EQ(run(kNone, 128, &out), "");
    for (int t = 0; t < 128; ++t) {
        EXPECT_TRUE(std::isnan(out[t])) << "thread " << t << " read " << out[t] << " before the wait";
        EXPECT_EQ(out[128 + t], 16.0f) << "thread " << t;
    }
}

TEST(CudaEmulatorWgmma, MissingFenceCommitOrWaitFailsTheLaunch) {
    expect_failure(kNoFence, 128, "without a wgmma.fence");
    expect_failure(kNoWait, 128, "still in flight (0 never committed)");
    expect_failure(kNoCommit, 128, "still in flight (1 never committed)");
}

TEST(CudaEmulatorWgmma, AWarpgroupWithThreadsMissingFailsTheLaunch) {
    expect_failure(kNone, 96, "thread 96 of the warpgroup did not take part");
    expect_failure(kWarpExits, 128, "wait at a wgmma.wait_group for a wgmma.mma_async that other warps");
}

// wgmma.mma_async is .sync over a warp, not a barrier over the warpgroup: each warp issues
// (and the hardware may read the shared operands) as soon as it gets there, so stores of
// other warps need a barrier before it. The emulator lets each warp issue on its own and
// reads its operands then and at the wait, so the stores landing in between show.
TEST(CudaEmulatorWgmma, OperandsStoredByOtherWarpsNeedABarrier) {
    std::vector<float> out;
    ASSERT_EQ(run(kStoresThenBarrier, 128, &out), "");
    for (int t = 0; t < 128; ++t) EXPECT_EQ(out[128 + t], 32.0f) << "thread " << t;
    expect_failure(kStoresNoBarrier, 128, "shared-memory operands changed between the issue and the wgmma.wait_group");
}

TEST(CudaEmulatorWgmma, BadDescriptorsFailTheLaunch) {
    expect_failure(kMisaligned, 128, "is not 16-byte aligned");
    expect_failure(kPastTheEnd, 128, "operand A: element (");
    expect_failure(kPastTheEnd, 128, "past the 4096 bytes of dynamic shared memory");
    expect_failure(kNonUniform, 128, "give different descriptors");
    expect_failure(kBadN, 128, "N = 12 is not a multiple of 8 from 8 to 256");
}

TEST(CudaEmulatorWgmma, ARegistersChangedBeforeTheWaitFailTheLaunch) {
    expect_failure(kARegsChanged, 128, "A-fragment registers changed before the wgmma.wait_group");
}

namespace tma = ::gpt::cuda::tma;

enum TmaMisuse { kTmaNone, kTmaTooManyBytes, kTmaNoInit, kTmaNoWait };
constexpr int kTensorRows = 100, kBoxRows = 64, kBoxCols = 64;  // a 128-byte swizzled 64 x 64 box

// Thread 0 loads the box from row 64 (36 rows inside the tensor, 28 past its end) and every
// thread reads it back through the 128-byte swizzle: out[r * 64 + c] = the element's bits.
__global__ void tma_kernel(float* out, const GPT_GRID_CONSTANT tma::TensorMap map, int misuse) {
    extern __shared__ __align__(1024) unsigned char smem[];
    auto* bar = reinterpret_cast<std::uint64_t*>(smem + kBoxRows * kBoxCols * 2);
    if (threadIdx.x == 0 && misuse != kTmaNoInit) {
        tma::mbarrier_init(bar, 1);
        tma::fence_mbarrier_init();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        tma::mbarrier_arrive_expect_tx(bar, kBoxRows * kBoxCols * 2 + (misuse == kTmaTooManyBytes ? 16 : 0));
        tma::load_2d(smem, &map, bar, 0, 64);
    }
    if (misuse == kTmaNoWait) return;
    tma::mbarrier_wait(bar, 0);
    for (int i = threadIdx.x; i < kBoxRows * kBoxCols; i += blockDim.x) {
        const int r = i / kBoxCols, c = i % kBoxCols;
        const int chunk = (c / 8) ^ (r % 8);  // the 16-byte chunk, XORed with the row
        std::uint16_t bits;
        std::memcpy(&bits, smem + r * 128 + chunk * 16 + c % 8 * 2, 2);
        out[i] = static_cast<float>(bits);
    }
}

std::string run_tma(int misuse, std::vector<float>* out = nullptr) {
    std::vector<std::uint16_t> host(kTensorRows * kBoxCols);
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<std::uint16_t>(i + 1);
    std::uint16_t* tensor = nullptr;
    cudaMalloc(&tensor, host.size() * 2);
    cudaMemcpy(tensor, host.data(), host.size() * 2, cudaMemcpyHostToDevice);
    tma::TensorMap map{};
    std::string msg;
    if (tma::make_tensor_map_2d(&map, tensor, kTensorRows, kBoxCols, kBoxCols * 2, kBoxRows, kBoxCols, 128) !=
        cudaSuccess)
        msg = "make_tensor_map_2d failed";
    Out d(kBoxRows * kBoxCols);
    if (msg.empty()) {
        tma_kernel<<<1, 128, kBoxRows * kBoxCols * 2 + 16>>>(d.p, map, misuse);
        msg = launch_error();
        if (msg.empty() && out) *out = d.get(kBoxRows * kBoxCols);
    }
    cudaFree(tensor);
    return msg;
}

TEST(CudaEmulatorTma, ATileLandsSwizzledWithZerosOutsideTheTensor) {
    std::vector<float> out;
    ASSERT_EQ(run_tma(kTmaNone, &out), "");
    for (int r = 0; r < kBoxRows; ++r)
        for (int c = 0; c < kBoxCols; ++c) {
            const int row = 64 + r;
            const float want = row < kTensorRows ? static_cast<float>(row * kBoxCols + c + 1) : 0.0f;
            ASSERT_EQ(out[r * kBoxCols + c], want) << "box element (" << r << ", " << c << ")";
        }
}

TEST(CudaEmulatorTma, MisusedBarriersFailTheLaunch) {
    std::string msg = run_tma(kTmaTooManyBytes);
    EXPECT_NE(msg.find("spin at an mbarrier wait whose phase can never complete"), std::string::npos) << msg;
    msg = run_tma(kTmaNoInit);
    EXPECT_NE(msg.find("the mbarrier was not initialised"), std::string::npos) << msg;
    msg = run_tma(kTmaNoWait);
    EXPECT_NE(msg.find("TMA copies never waited for"), std::string::npos) << msg;
}

enum BulkMisuse { kBulkNone, kBulkEarlyWrite, kBulkNoWait, kBulkMisaligned, kBulkNotShared };

// Two rounds into one 512-float destination: thread 0 stages (2 + round) * (i + 1) in shared
// memory and adds it into out by one bulk reduction a round, waiting for the read before the
// next round's stores (out = 5 (i + 1) in all). kBulkEarlyWrite stores the second round
// before that wait: the first reduction then reads the second round's values too (the
// emulator reads at the wait, the latest the GPU may), so out is 6 (i + 1).
__global__ void bulk_reduce_kernel(float* out, int misuse) {
    extern __shared__ __align__(128) unsigned char smem[];
    auto* stage = reinterpret_cast<float*>(smem);
    if (threadIdx.x != 0) return;
    for (int round = 0; round < 2; ++round) {
        if (round == 1 && misuse != kBulkEarlyWrite) tma::bulk_wait_group_read<0>();
        for (int i = 0; i < 512; ++i) stage[i] = static_cast<float>((2 + round) * (i + 1));
        w::fence_proxy_async_shared();
        const float* src = misuse == kBulkNotShared ? out : stage;
        tma::bulk_reduce_add_f32(out + (misuse == kBulkMisaligned ? 1 : 0), src, 512 * 4 - (misuse == kBulkMisaligned ? 16 : 0));
        tma::bulk_commit_group();
    }
    if (misuse != kBulkNoWait) tma::bulk_wait_group<0>();
}

std::string run_bulk(int misuse, std::vector<float>* out = nullptr) {
    return run_into(512, out, [&](float* p) {
        std::vector<float> zeros(512, 0.0f);
        cudaMemcpy(p, zeros.data(), 512 * 4, cudaMemcpyHostToDevice);
        bulk_reduce_kernel<<<1, 32, 512 * 4>>>(p, misuse);
    });
}

TEST(CudaEmulatorBulkReduce, AddsStagedFloatsIntoGlobalMemory) {
    std::vector<float> out;
    ASSERT_EQ(run_bulk(kBulkNone, &out), "");
    for (int i = 0; i < 512; ++i) ASSERT_EQ(out[i], 5.0f * (i + 1)) << i;
}

TEST(CudaEmulatorBulkReduce, MisuseShowsOrFailsTheLaunch) {
    std::vector<float> out;
    // Under GPT_EMU_SCHEDULE=warps reductions happen at issue (the earliest), where the early
    // store is harmless; the other schedules read at the wait.
    const char* schedule = std::getenv("GPT_EMU_SCHEDULE");
    const bool at_issue = schedule && std::string(schedule) == "warps";
    ASSERT_EQ(run_bulk(kBulkEarlyWrite, &out), "");
    EXPECT_EQ(out[9], at_issue ? 50.0f : 60.0f) << "the first reduction read the stage at its wait";
    std::string msg = run_bulk(kBulkNoWait);
    EXPECT_NE(msg.find("bulk reductions (cp.reduce.async.bulk) never waited for"), std::string::npos) << msg;
    msg = run_bulk(kBulkMisaligned);
    EXPECT_NE(msg.find("is not 16-byte aligned"), std::string::npos) << msg;
    msg = run_bulk(kBulkNotShared);
    EXPECT_NE(msg.find("is device (global) memory, not shared memory"), std::string::npos) << msg;
}

// Warpgroup 1 issues a product that reads B, lets warpgroup 0 go on (barrier 2) and only
// then waits for it; warpgroup 0 runs three products of its own and overwrites B. `ordered`:
// warpgroup 1 arrives at barrier 3 after its wait and warpgroup 0 waits there before the
// overwrite, the barrier a write after another warpgroup's read needs.
__global__ void warpgroup_race_kernel(float* out, bool ordered) {
    extern __shared__ __align__(1024) unsigned char smem[];
    auto* h = reinterpret_cast<std::uint16_t*>(smem);
    fill_ones(h);
    const std::uint64_t da = w::make_desc(smem, 128, 256, w::Swizzle::None);
    const std::uint64_t db = w::make_desc(smem + 2048, 128, 256, w::Swizzle::None);
    float acc[32];
    for (float& v : acc) v = 0.0f;
    if (threadIdx.x >= 128) {
        w::fence();
        w::mma_ss<64, __half>(acc, da, db, false);
        w::commit_group();
        gpt::cuda::named_barrier_arrive(2, 256);
        w::wait_group<0>();
        w::fence_operand(acc);
        if (ordered) gpt::cuda::named_barrier_arrive(3, 256);
        out[threadIdx.x - 128] = acc[0];
    } else {
        gpt::cuda::named_barrier_sync(2, 256);
        for (int k = 0; k < 3; ++k) {
            w::fence();
            w::mma_ss<64, __half>(acc, da, db, k > 0);
            w::commit_group();
            w::wait_group<0>();
            w::fence_operand(acc);
        }
        // Its own products are done reading B in all four warps (a warp's wait covers its
        // own part of the product only).
        gpt::cuda::named_barrier_sync(4, 128);
        if (ordered) gpt::cuda::named_barrier_sync(3, 256);
        for (int i = threadIdx.x; i < 1024; i += 128) h[1024 + i] = 0x4000;  // B := 2.0
        w::fence_proxy_async_shared();
    }
}

std::string run_race(bool ordered, std::vector<float>* out = nullptr) {
    return run_into(128, out, [&](float* p) { warpgroup_race_kernel<<<1, 256, kSmemBytes>>>(p, ordered); });
}

// A write after another warpgroup's read: under GPT_EMU_SCHEDULE=warps warpgroup 0, released
// by warpgroup 1, goes on before warpgroup 1's warps reach their wait, so its overwrite lands
// between warpgroup 1's issue and wait, which reports it. (Under forward and reverse every
// warp runs to its next wait each round, and warpgroup 1's wait comes first: the race is
// not reached there, and the unordered run is not asserted.)
TEST(CudaEmulatorNamedBarriers, AWriteAfterAnotherWarpgroupsReadNeedsABarrier) {
    std::vector<float> out;
    ASSERT_EQ(run_race(true, &out), "");
    for (int t = 0; t < 128; ++t) EXPECT_EQ(out[t], 16.0f) << "thread " << t;
    const char* s = std::getenv("GPT_EMU_SCHEDULE");
    if (s && std::string(s) == "warps") {
        const std::string msg = run_race(false);
        EXPECT_NE(msg.find("shared-memory operands changed between the issue and the wgmma.wait_group"),
                  std::string::npos) << msg;
    }
}

enum NamedMisuse { kNamedNone, kNamedCountsDiffer, kNamedNoProducer, kNamedPartialSetmaxnreg, kNamedArriveTwice };

// Warpgroup 0 produces 128 values into shared memory and arrives at barrier 1; warpgroup 1
// waits there and reads them; each first moves registers as FA3's warpgroups do.
__global__ void named_barrier_kernel(float* out, int misuse) {
    extern __shared__ __align__(16) float buf[];
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    if (misuse == kNamedPartialSetmaxnreg) {
        if (threadIdx.x < 32) gpt::cuda::setmaxnreg<40, false>();
    } else if (wg == 0) {
        gpt::cuda::setmaxnreg<40, false>();
    } else {
        gpt::cuda::setmaxnreg<232, true>();
    }
    if (wg == 0) {
        buf[t] = static_cast<float>(t) + 0.5f;
        if (misuse != kNamedNoProducer) gpt::cuda::named_barrier_arrive(1, 256);
    } else {
        gpt::cuda::named_barrier_sync(1, misuse == kNamedCountsDiffer ? 128 : 256);
        out[t] = buf[t];
        // A turn passed that nobody takes (FA3's ping-pong passing once too often at its end).
        if (misuse == kNamedArriveTwice) gpt::cuda::named_barrier_arrive(2, 256);
    }
}

std::string run_named(int misuse, std::vector<float>* out = nullptr) {
    return run_into(128, out, [&](float* p) { named_barrier_kernel<<<1, 256, 128 * sizeof(float)>>>(p, misuse); });
}

TEST(CudaEmulatorNamedBarriers, OrderAProducerAndAConsumerWarpgroup) {
    std::vector<float> out;
    ASSERT_EQ(run_named(kNamedNone, &out), "");
    for (int t = 0; t < 128; ++t) EXPECT_EQ(out[t], static_cast<float>(t) + 0.5f) << "thread " << t;
}

TEST(CudaEmulatorNamedBarriers, MisuseFailsTheLaunch) {
    std::string msg = run_named(kNamedCountsDiffer);
    EXPECT_NE(msg.find("arrivals name thread counts"), std::string::npos) << msg;  // 256 and 128, in either order
    msg = run_named(kNamedNoProducer);
    EXPECT_NE(msg.find("wait at a named barrier (bar.sync) that too few threads reach"), std::string::npos) << msg;
    msg = run_named(kNamedPartialSetmaxnreg);
    EXPECT_NE(msg.find("setmaxnreg: thread 32 of the warpgroup did not take part"), std::string::npos) << msg;
    msg = run_named(kNamedArriveTwice);
    EXPECT_NE(msg.find("finished with 128 of 256 arrivals at named barrier 2 that no bar.sync completed"),
              std::string::npos) << msg;
}

}  // namespace
