#include "core/environment.hpp"

#include <cstdlib>
#include <cstring>

#include "core/errors.hpp"

namespace gpt::env {

namespace {

const char* get(const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? v : nullptr;
}

}  // namespace

std::optional<double> device_memory_gb() {
    const char* e = get("DEVICE_MEMORY_GB");
    if (!e) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(e, &end);
    GPT_REQUIRE(end && *end == '\0' && v > 0, UsageError, "DEVICE_MEMORY_GB='", e,
                "' is not a positive number of GiB (e.g. DEVICE_MEMORY_GB=80)");
    return v;
}

std::optional<int> cpu_cores() {
    const char* e = get("GPT_CPU_CORES");
    if (!e) return std::nullopt;
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    GPT_REQUIRE(end && *end == '\0' && v > 0, UsageError, "GPT_CPU_CORES='", e,
                "' is not a positive number of cores");
    return static_cast<int>(v);
}

namespace {
// GPT_CUDA_FLASH names one kernel choice (sm80: the default kernels, by name). Any other value
// is refused: a misspelt choice would otherwise measure the default kernels under the name
// the user meant.
constexpr const char* kFlashChoices[] = {"sm80",           "simple",         "sm90",       "sm90-fwd", "sm90-basic",
                                         "sm90-bwd-1wg",   "sm90-bwd-plain", "sm90-dq-atomic", "sm90-bwd-ws"};
bool cuda_flash_is(const char* value) {
    const char* e = get("GPT_CUDA_FLASH");
    if (!e) return false;
    bool known = false;
    for (const char* c : kFlashChoices) known = known || std::strcmp(e, c) == 0;
    GPT_REQUIRE(known, UsageError, "GPT_CUDA_FLASH='", e,
                "' is none of sm80 (the default), simple, sm90, sm90-fwd, sm90-basic, sm90-bwd-1wg, sm90-bwd-plain, "
                "sm90-dq-atomic, sm90-bwd-ws");
    return std::strcmp(e, value) == 0;
}
}  // namespace

bool cuda_flash_simple() { return cuda_flash_is("simple"); }
bool cuda_flash_sm90() { return cuda_flash_is("sm90"); }
bool cuda_flash_sm90_fwd() { return cuda_flash_is("sm90-fwd"); }
bool cuda_flash_sm90_basic() { return cuda_flash_is("sm90-basic"); }
bool cuda_flash_sm90_bwd_1wg() { return cuda_flash_is("sm90-bwd-1wg"); }
bool cuda_flash_sm90_bwd_plain() { return cuda_flash_is("sm90-bwd-plain"); }
bool cuda_flash_sm90_dq_atomic() { return cuda_flash_is("sm90-dq-atomic"); }
bool cuda_flash_sm90_bwd_ws() { return cuda_flash_is("sm90-bwd-ws"); }

namespace {
// A switch of two values: false for the default (or unset, or empty), true for the other;
// UsageError for anything else.
bool is_other_of_two(const char* name, const char* default_value, const char* other) {
    const char* e = get(name);
    if (!e || std::strcmp(e, default_value) == 0) return false;
    GPT_REQUIRE(std::strcmp(e, other) == 0, UsageError, name, "='", e, "' is neither ", default_value, " nor ",
                other);
    return true;
}
}  // namespace

bool cuda_gemm_epilogue_unfused() { return is_other_of_two("GPT_CUDA_GEMM_EPILOGUE", "fused", "unfused"); }
bool cuda_fp8_fast_accum_forward() { return !is_other_of_two("GPT_CUDA_FP8_FAST_ACCUM", "forward", "off"); }
bool cuda_fp8_cast_tile() { return is_other_of_two("GPT_CUDA_FP8_CAST", "vec", "tile"); }
bool cuda_dropout_draws_per_element() { return is_other_of_two("GPT_CUDA_DROPOUT_DRAWS", "word", "element"); }
bool cuda_gemm_autotune() { return is_other_of_two("GPT_CUDA_GEMM_ALGO", "heuristic", "autotune"); }
bool fp8_input_cast_separate() { return is_other_of_two("GPT_FP8_INPUT_CAST", "fused", "separate"); }
bool fp8_gelu_epilogue() { return is_other_of_two("GPT_FP8_GELU", "pass", "epilogue"); }
bool fp8_bias_grad_separate() { return is_other_of_two("GPT_FP8_BIAS_GRAD", "fused", "separate"); }

std::optional<double> distributed_timeout_seconds() {
    const char* e = get("GPT_DISTRIBUTED_TIMEOUT_SECONDS");
    if (!e) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(e, &end);
    GPT_REQUIRE(end && *end == '\0' && v > 0 && v < 1e9, UsageError, "GPT_DISTRIBUTED_TIMEOUT_SECONDS='", e,
                "' is not a positive number of seconds");
    return v;
}

namespace {
// A test hook's rank: unset, or a non-negative integer (UsageError otherwise).
std::optional<int> rank_variable(const char* name) {
    const char* e = get(name);
    if (!e) return std::nullopt;
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    GPT_REQUIRE(end && *end == '\0' && v >= 0 && v < (1L << 20), UsageError, name, "='", e, "' is not a rank");
    return static_cast<int>(v);
}
}  // namespace

std::optional<int> test_stall_before_save() { return rank_variable("GPT_TEST_STALL_BEFORE_SAVE"); }
std::optional<int> test_stall_in_save() { return rank_variable("GPT_TEST_STALL_IN_SAVE"); }

std::vector<std::pair<std::string, std::string>> rows() {
    std::vector<std::pair<std::string, std::string>> r;
    for (const char* name : {"DEVICE_MEMORY_GB", "GPT_CPU_CORES", "GPT_CUDA_FLASH", "GPT_CUDA_GEMM_EPILOGUE",
                             "GPT_CUDA_GEMM_ALGO", "GPT_CUDA_FP8_FAST_ACCUM", "GPT_CUDA_FP8_CAST", "GPT_FP8_INPUT_CAST",
                             "GPT_FP8_GELU", "GPT_FP8_BIAS_GRAD",
                             "GPT_DISTRIBUTED_TIMEOUT_SECONDS",
                             "GPT_TEST_STALL_BEFORE_SAVE", "GPT_TEST_STALL_IN_SAVE"}) {
        const char* v = std::getenv(name);
        r.emplace_back(name, v ? v : "None");
    }
    return r;
}

}  // namespace gpt::env
