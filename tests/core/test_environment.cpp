// The kernel switches read from the environment (core/environment.hpp): a misspelt value is
// an error, not a silent default, and every switch is a row of the printed arguments.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/environment.hpp"
#include "core/errors.hpp"

namespace gpt {
namespace {

// Sets a variable for one scope and restores what was there.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        if (value) setenv(name, value, 1);
        else unsetenv(name);
    }
    ~ScopedEnv() {
        if (old_.empty()) unsetenv(name_);
        else setenv(name_, old_.c_str(), 1);
    }

private:
    const char* name_;
    std::string old_;
};

TEST(Environment, GemmEpilogueSwitch) {
    {
        ScopedEnv e("GPT_CUDA_GEMM_EPILOGUE", nullptr);
        EXPECT_FALSE(env::cuda_gemm_epilogue_unfused());
    }
    {
        ScopedEnv e("GPT_CUDA_GEMM_EPILOGUE", "fused");
        EXPECT_FALSE(env::cuda_gemm_epilogue_unfused());
    }
    {
        ScopedEnv e("GPT_CUDA_GEMM_EPILOGUE", "unfused");
        EXPECT_TRUE(env::cuda_gemm_epilogue_unfused());
    }
    for (const char* bad : {"Unfused", "unfuse", "0", "none"}) {
        ScopedEnv e("GPT_CUDA_GEMM_EPILOGUE", bad);
        EXPECT_THROW(env::cuda_gemm_epilogue_unfused(), UsageError) << bad;
    }
}

// GPT_CUDA_FLASH: `simple`, `sm90` and `sm90-basic` select, anything else keeps the default kernels (the
// switch predates the strict parsing of the others, and scripts set other values).
TEST(Environment, FlashSwitch) {
    {
        ScopedEnv e("GPT_CUDA_FLASH", nullptr);
        EXPECT_FALSE(env::cuda_flash_simple());
        EXPECT_FALSE(env::cuda_flash_sm90());
    }
    {
        ScopedEnv e("GPT_CUDA_FLASH", "sm90");
        EXPECT_FALSE(env::cuda_flash_simple());
        EXPECT_TRUE(env::cuda_flash_sm90());
        EXPECT_FALSE(env::cuda_flash_sm90_basic());
    }
    {
        ScopedEnv e("GPT_CUDA_FLASH", "sm90-basic");
        EXPECT_FALSE(env::cuda_flash_sm90());
        EXPECT_TRUE(env::cuda_flash_sm90_basic());
    }
    {
        ScopedEnv e("GPT_CUDA_FLASH", "simple");
        EXPECT_TRUE(env::cuda_flash_simple());
        EXPECT_FALSE(env::cuda_flash_sm90());
        EXPECT_FALSE(env::cuda_flash_sm90_basic());
    }
    for (const char* other : {"SM90", "sm80", "wgmma", "sm90-Basic", "sm90basic"}) {
        ScopedEnv e("GPT_CUDA_FLASH", other);
        EXPECT_FALSE(env::cuda_flash_simple()) << other;
        EXPECT_FALSE(env::cuda_flash_sm90()) << other;
        EXPECT_FALSE(env::cuda_flash_sm90_basic()) << other;
    }
}

TEST(Environment, SwitchesArePrintedRows) {
    ScopedEnv e("GPT_CUDA_GEMM_EPILOGUE", "unfused");
    bool flash = false, epilogue = false;
    for (const auto& [name, value] : env::rows()) {
        if (name == "GPT_CUDA_FLASH") flash = true;
        if (name == "GPT_CUDA_GEMM_EPILOGUE") epilogue = value == "unfused";
    }
    EXPECT_TRUE(flash);
    EXPECT_TRUE(epilogue);
}

}  // namespace
}  // namespace gpt
