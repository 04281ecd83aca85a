// --device resolved once (issue #35): RunConfig carries the device after --device auto, the
// one gpt_pretrain builds its backend on and check_run_memory measures; explicit devices are
// taken as asked, and auto falls back to the CPU with make_backend's own reason.
#include <gtest/gtest.h>

#include "backend/backend.hpp"
#include "core/errors.hpp"
#include "train/run/device_backend.hpp"

using namespace gpt;
using train::resolve_device;

TEST(RunDevice, ExplicitDevicesAreTakenAsAsked) {
    EXPECT_EQ(resolve_device(DeviceKind::Cpu).kind, DeviceKind::Cpu);
    EXPECT_EQ(resolve_device(DeviceKind::Cuda).kind, DeviceKind::Cuda);
    EXPECT_EQ(resolve_device(DeviceKind::Cpu).auto_fallback, "");
    EXPECT_EQ(resolve_device(DeviceKind::Cuda).auto_fallback, "");
}

TEST(RunDevice, AutoIsCudaExactlyWhenMakeBackendWouldBuildIt) {
    const train::RunDevice d = resolve_device(DeviceKind::Auto);
    const std::string why = cuda_unusable_reason();
    if (!GPT_HAVE_CUDA) {
        // A build without CUDA takes the CPU quietly, as it always did.
        EXPECT_EQ(d.kind, DeviceKind::Cpu);
        EXPECT_EQ(d.auto_fallback, "");
    } else if (why.empty()) {
        EXPECT_EQ(d.kind, DeviceKind::Cuda);
        EXPECT_EQ(d.auto_fallback, "");
    } else {
        EXPECT_EQ(d.kind, DeviceKind::Cpu);
        EXPECT_EQ(d.auto_fallback, why);  // the text the log line quotes
    }
}

TEST(RunDevice, CudaThatCannotBeUsedIsRefusedWithTheSameReason) {
    const std::string why = cuda_unusable_reason();
    if (why.empty()) GTEST_SKIP() << "a GPU is usable here";
    try {
        train::make_run_backend({DeviceKind::Cuda, ""}, 0);
        FAIL() << "cuda was built without a usable GPU";
    } catch (const UsageError& e) {
        EXPECT_EQ(std::string(e.what()), why);
    }
}
