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

TEST(Environment, Fp8FastAccumulationSwitch) {
    {
        ScopedEnv e("GPT_CUDA_FP8_FAST_ACCUM", nullptr);
        EXPECT_TRUE(env::cuda_fp8_fast_accum_forward());
    }
    {
        ScopedEnv e("GPT_CUDA_FP8_FAST_ACCUM", "forward");
        EXPECT_TRUE(env::cuda_fp8_fast_accum_forward());
    }
    {
        ScopedEnv e("GPT_CUDA_FP8_FAST_ACCUM", "off");
        EXPECT_FALSE(env::cuda_fp8_fast_accum_forward());
    }
    for (const char* bad : {"Forward", "on", "0", "all"}) {
        ScopedEnv e("GPT_CUDA_FP8_FAST_ACCUM", bad);
        EXPECT_THROW(env::cuda_fp8_fast_accum_forward(), UsageError) << bad;
    }
}

// GPT_CUDA_FLASH: `simple`, `sm90`, `sm90-fwd`, `sm90-basic` and `sm90-bwd-plain` select, anything else keeps the default kernels (the
// switch predates the strict parsing of the others, and scripts set other values).
TEST(Environment, FlashSwitch) {
    struct Case {
        const char* value;
        bool simple, sm90, sm90_fwd, sm90_basic, sm90_bwd_plain;
    };
    const Case cases[] = {{nullptr, false, false, false, false, false},
                          {"simple", true, false, false, false, false},
                          {"sm90", false, true, false, false, false},
                          {"sm90-fwd", false, false, true, false, false},
                          {"sm90-basic", false, false, false, true, false},
                          {"sm90-bwd-plain", false, false, false, false, true},
                          // near misses keep the default kernels
                          {"SM90", false, false, false, false, false},
                          {"sm80", false, false, false, false, false},
                          {"wgmma", false, false, false, false, false},
                          {"sm90-bwd", false, false, false, false, false},
                          {"sm90-fwd ", false, false, false, false, false},
                          {"sm90-Basic", false, false, false, false, false},
                          {"sm90basic", false, false, false, false, false},
                          {"sm90-bwd-plain ", false, false, false, false, false},
                          {"sm90-plain", false, false, false, false, false}};
    for (const Case& c : cases) {
        ScopedEnv e("GPT_CUDA_FLASH", c.value);
        const char* v = c.value ? c.value : "(unset)";
        EXPECT_EQ(env::cuda_flash_simple(), c.simple) << v;
        EXPECT_EQ(env::cuda_flash_sm90(), c.sm90) << v;
        EXPECT_EQ(env::cuda_flash_sm90_fwd(), c.sm90_fwd) << v;
        EXPECT_EQ(env::cuda_flash_sm90_basic(), c.sm90_basic) << v;
        EXPECT_EQ(env::cuda_flash_sm90_bwd_plain(), c.sm90_bwd_plain) << v;
    }
}

TEST(Environment, SwitchesArePrintedRows) {
    ScopedEnv e("GPT_CUDA_GEMM_EPILOGUE", "unfused");
    ScopedEnv f("GPT_CUDA_FP8_FAST_ACCUM", "off");
    bool flash = false, epilogue = false, fast_accum = false;
    for (const auto& [name, value] : env::rows()) {
        if (name == "GPT_CUDA_FLASH") flash = true;
        if (name == "GPT_CUDA_GEMM_EPILOGUE") epilogue = value == "unfused";
        if (name == "GPT_CUDA_FP8_FAST_ACCUM") fast_accum = value == "off";
    }
    EXPECT_TRUE(flash);
    EXPECT_TRUE(epilogue);
    EXPECT_TRUE(fast_accum);
}

}  // namespace
}  // namespace gpt
