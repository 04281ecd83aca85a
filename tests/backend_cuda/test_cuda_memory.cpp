// CUDA backend memory: accounting, reuse of cached blocks, copies, device selection.
#include "cuda_test_util.hpp"

namespace gpt::test {
namespace {

class CudaMemory : public CudaVsCpu {};

TEST_F(CudaMemory, AccountingAndReuse) {
    EXPECT_EQ(gpu().name(), "cuda");
    EXPECT_FALSE(gpu().host_memory());
    const std::size_t base = gpu().bytes_in_use();
    void* a = gpu().alloc(1000);
    void* b = gpu().alloc(3u << 20);
    EXPECT_EQ(gpu().bytes_in_use(), base + 1000 + (3u << 20));
    EXPECT_GE(gpu().peak_bytes(), gpu().bytes_in_use());
    gpu().free(b);
    EXPECT_EQ(gpu().bytes_in_use(), base + 1000);
    // The cache hands the same block back for the same size class (no cudaMalloc).
    void* c = gpu().alloc((3u << 20) - 5);
    EXPECT_EQ(c, b);
    gpu().free(c);
    gpu().free(a);
    EXPECT_EQ(gpu().bytes_in_use(), base);
    EXPECT_THROW(gpu().free(reinterpret_cast<void*>(0x10)), InternalError);
}

TEST_F(CudaMemory, CopiesAndZero) {
    const std::size_t n = 100003;
    std::vector<unsigned char> src(n), back(n, 0);
    for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>(i * 31 + 7);
    void* d1 = gpu().alloc(n);
    void* d2 = gpu().alloc(n);
    gpu().copy_to_device(d1, src.data(), n);
    gpu().copy(d2, d1, n);
    gpu().copy_to_host(back.data(), d2, n);
    EXPECT_EQ(back, src);
    gpu().zero(static_cast<char*>(d2) + 10, 100);
    gpu().synchronize();
    gpu().copy_to_host(back.data(), d2, n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], (i >= 10 && i < 110) ? 0 : src[i]) << i;
    gpu().free(d1);
    gpu().free(d2);
}

TEST_F(CudaMemory, LocalRankPicksADevice) {
    // local_rank wraps around the visible devices, so any rank index is valid.
    auto be = make_backend("cuda", 3 * visible_gpu_count() + 1);
    void* p = be->alloc(16);
    be->free(p);
    EXPECT_THROW(make_backend("cuda", -1), UsageError);
}

}  // namespace
}  // namespace gpt::test
