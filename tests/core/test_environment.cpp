// The kernel switches read from the environment (core/environment.hpp): a misspelt value is
// an error, not a silent default, and every switch is a row of the printed arguments.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "core/environment.hpp"
#include "core/errors.hpp"
#include "test_env.hpp"

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

// GPT_CUDA_GEMM_ALGO: heuristic (or unset, or empty) keeps the heuristic's first algorithm, autotune times the
// candidates, anything else is refused.
TEST(Environment, GemmAlgoSwitch) {
    for (const char* v : {static_cast<const char*>(nullptr), "", "heuristic"}) {
        ScopedEnv e("GPT_CUDA_GEMM_ALGO", v);
        EXPECT_FALSE(env::cuda_gemm_autotune()) << (v ? v : "(unset)");
    }
    {
        ScopedEnv e("GPT_CUDA_GEMM_ALGO", "autotune");
        EXPECT_TRUE(env::cuda_gemm_autotune());
    }
    for (const char* bad : {"Autotune", "tune", "1", "heuristic "}) {
        ScopedEnv e("GPT_CUDA_GEMM_ALGO", bad);
        EXPECT_THROW(env::cuda_gemm_autotune(), UsageError) << bad;
    }
}

// GPT_CUDA_FLASH: `simple`, `sm90`, `sm90-fwd`, `sm90-basic`, `sm90-bwd-1wg`,
// `sm90-bwd-plain`, `sm90-dq-atomic` and `sm90-bwd-ws` select, unset, empty or `sm80` keep the
// default kernels, and anything else is refused (a near miss would measure the default under
// another name).
TEST(Environment, FlashSwitch) {
    // The value each switch reads true for, in the order of `reads` below.
    const char* const names[] = {"simple",         "sm90",           "sm90-fwd",   "sm90-basic",
                                 "sm90-bwd-1wg", "sm90-bwd-plain", "sm90-dq-atomic", "sm90-bwd-ws"};
    bool (*const reads[])() = {env::cuda_flash_simple,       env::cuda_flash_sm90,
                               env::cuda_flash_sm90_fwd,     env::cuda_flash_sm90_basic,
                               env::cuda_flash_sm90_bwd_1wg, env::cuda_flash_sm90_bwd_plain,
                               env::cuda_flash_sm90_dq_atomic, env::cuda_flash_sm90_bwd_ws};
    static_assert(std::size(names) == std::size(reads));
    for (const char* value : {static_cast<const char*>(nullptr), "", "sm80", "simple", "sm90", "sm90-fwd",
                              "sm90-basic", "sm90-bwd-1wg", "sm90-bwd-plain", "sm90-dq-atomic", "sm90-bwd-ws"}) {
        ScopedEnv e("GPT_CUDA_FLASH", value);
        const char* v = value ? value : "(unset)";
        for (std::size_t i = 0; i < std::size(names); ++i)
            EXPECT_EQ(reads[i](), value != nullptr && std::strcmp(value, names[i]) == 0) << v << " read by " << names[i];
    }
    for (const char* bad : {"SM90", "wgmma", "sm90-bwd", "sm90-fwd ", "sm90-Basic", "sm90basic", "sm90a", "1",
                            "sm90-bwd-plain ", "sm90-plain", "sm90-bwd-2wg", "sm90-bwd-1WG", "sm90-dq-atomics",
                            "sm90-dq", "sm90-ws", "sm90-bwd-WS", "sm90-bwd-ws "}) {
        ScopedEnv e("GPT_CUDA_FLASH", bad);
        EXPECT_THROW(env::cuda_flash_sm90(), UsageError) << bad;
        EXPECT_THROW(env::cuda_flash_simple(), UsageError) << bad;
    }
}

// A switch of two values read by `is_other` (true for `other`): unset and `first` read false,
// `other` true, every near miss a UsageError.
void expect_two_value_switch(const char* name, bool (*is_other)(), const char* first, const char* other,
                             std::initializer_list<const char*> bad) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(is_other());
    {
        ScopedEnv e(name, first);
        EXPECT_FALSE(is_other());
    }
    {
        ScopedEnv e(name, other);
        EXPECT_TRUE(is_other());
    }
    for (const char* b : bad) {
        ScopedEnv e(name, b);
        EXPECT_THROW(is_other(), UsageError) << b;
    }
}

TEST(Environment, Fp8InputCastSwitch) {
    expect_two_value_switch("GPT_FP8_INPUT_CAST", env::fp8_input_cast_separate, "fused", "separate",
                            {"Fused", "off", "split", "separate "});
}

TEST(Environment, DropoutDrawsSwitch) {
    expect_two_value_switch("GPT_CUDA_DROPOUT_DRAWS", env::cuda_dropout_draws_per_element, "word", "element",
                            {"Word", "words", "elements", "element ", "philox"});
}

TEST(Environment, Fp8CastKernelSwitch) {
    expect_two_value_switch("GPT_CUDA_FP8_CAST", env::cuda_fp8_cast_tile, "vec", "tile",
                            {"Vec", "vectorised", "sm80", "tile "});
}

TEST(Environment, Fp8GeluSwitch) {
    expect_two_value_switch("GPT_FP8_GELU", env::fp8_gelu_epilogue, "pass", "epilogue",
                            {"Pass", "fused", "unfused", "epilogue "});
}

TEST(Environment, Fp8BiasGradSwitch) {
    expect_two_value_switch("GPT_FP8_BIAS_GRAD", env::fp8_bias_grad_separate, "fused", "separate",
                            {"Fused", "epilogue", "unfused", "separate "});
}

TEST(Environment, StallHooksTakeARank) {
    for (const char* name : {"GPT_TEST_STALL_BEFORE_SAVE", "GPT_TEST_STALL_IN_SAVE"}) {
        auto read = [&] {
            return std::string(name) == "GPT_TEST_STALL_IN_SAVE" ? env::test_stall_in_save() : env::test_stall_before_save();
        };
        EXPECT_EQ(read(), std::nullopt) << name;
        {
            ScopedEnv e(name, "3");
            EXPECT_EQ(read(), 3) << name;
        }
        for (const char* bad : {"-1", "x", "3 ", "2.5", ""}) {
            ScopedEnv e(name, bad);
            if (*bad == '\0') {
                EXPECT_EQ(read(), std::nullopt) << name << " empty";  // empty reads as unset, as every variable here
                continue;
            }
            EXPECT_THROW(read(), UsageError) << name << "='" << bad << "'";
        }
    }
}

TEST(Environment, SwitchesArePrintedRows) {
    ScopedEnv e("GPT_CUDA_GEMM_EPILOGUE", "unfused");
    ScopedEnv f("GPT_CUDA_FP8_FAST_ACCUM", "off");
    ScopedEnv g("GPT_CUDA_GEMM_ALGO", "autotune");
    bool flash = false, epilogue = false, fast_accum = false, algo = false;
    for (const auto& [name, value] : env::rows()) {
        if (name == "GPT_CUDA_FLASH") flash = true;
        if (name == "GPT_CUDA_GEMM_EPILOGUE") epilogue = value == "unfused";
        if (name == "GPT_CUDA_FP8_FAST_ACCUM") fast_accum = value == "off";
        if (name == "GPT_CUDA_GEMM_ALGO") algo = value == "autotune";
    }
    EXPECT_TRUE(flash);
    EXPECT_TRUE(epilogue);
    EXPECT_TRUE(fast_accum);
    EXPECT_TRUE(algo);
}

// Every kernel switch value that scripts/device_check.sh sets literally is one the readers
// accept: a misspelt value there would cost a lent device's step a UsageError (or, on the
// CPU-only switches, measure the wrong thing). A switch the script sets that this test does
// not know fails too, so a new one gets its reader listed here. Values from shell variables
// ($k, $(...)) are not checked.
TEST(Environment, DeviceCheckSetsOnlyKnownSwitchValues) {
    const std::map<std::string, std::function<void()>> readers = {
        {"GPT_CUDA_FLASH", [] { env::cuda_flash_sm90(); }},
        {"GPT_CUDA_GEMM_EPILOGUE", [] { env::cuda_gemm_epilogue_unfused(); }},
        {"GPT_CUDA_GEMM_ALGO", [] { env::cuda_gemm_autotune(); }},
        {"GPT_CUDA_FP8_FAST_ACCUM", [] { env::cuda_fp8_fast_accum_forward(); }},
        {"GPT_FP8_INPUT_CAST", [] { env::fp8_input_cast_separate(); }},
        {"GPT_FP8_GELU", [] { env::fp8_gelu_epilogue(); }},
        {"GPT_FP8_BIAS_GRAD", [] { env::fp8_bias_grad_separate(); }},
        {"GPT_CUDA_FP8_CAST", [] { env::cuda_fp8_cast_tile(); }},
        {"GPT_CUDA_DROPOUT_DRAWS", [] { env::cuda_dropout_draws_per_element(); }}};
    const std::string path = test::source_dir() + "/scripts/device_check.sh";
    std::ifstream in(path);
    ASSERT_TRUE(in) << "cannot read " << path;
    std::stringstream text;
    text << in.rdbuf();
    const std::string script = text.str();
    const std::regex assignment("(GPT_[A-Z0-9_]+)=([a-z0-9][a-z0-9-]*)");
    int checked = 0;
    for (auto it = std::sregex_iterator(script.begin(), script.end(), assignment); it != std::sregex_iterator(); ++it) {
        const std::string name = (*it)[1], value = (*it)[2];
        if (name.rfind("GPT_TEST_", 0) == 0) continue;  // the test harness's paths
        const auto reader = readers.find(name);
        if (reader == readers.end()) {
            ADD_FAILURE() << "device_check.sh sets " << name << ", a switch this test has no reader for";
            continue;
        }
        ScopedEnv e(name.c_str(), value.c_str());
        EXPECT_NO_THROW(reader->second()) << name << "=" << value << " in device_check.sh";
        ++checked;
    }
    EXPECT_GE(checked, 8) << "the script's switch rows were not found";
}

}  // namespace
}  // namespace gpt
