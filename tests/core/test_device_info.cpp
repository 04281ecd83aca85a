#include <gtest/gtest.h>

#include "core/device_info.hpp"
#include "core/errors.hpp"

using namespace gpt;

TEST(DeviceInfo, HostMemoryIsPlausible) {
    const std::size_t bytes = host_memory_bytes();
    EXPECT_GT(bytes, std::size_t{256} << 20);
    EXPECT_LT(bytes, std::size_t{1} << 50);
}

TEST(DeviceInfo, GpuQueriesAgreeWithBuild) {
    const int n = visible_gpu_count();
    EXPECT_GE(n, 0);
    if (!cuda_built()) {
        EXPECT_EQ(n, 0);
    }
    if (n == 0) {
        EXPECT_THROW(gpu_info(0), DeviceError);
        return;
    }
    GpuInfo info = gpu_info(0);
    EXPECT_FALSE(info.name.empty());
    EXPECT_GT(info.total_memory, std::size_t{1} << 30);
    EXPECT_GE(info.compute_capability, 60);
}
