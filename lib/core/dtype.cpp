#include "core/dtype.hpp"

#include "core/errors.hpp"

namespace gpt {

std::string_view dtype_name(DType t) {
    switch (t) {
        case DType::F32: return "fp32";
        case DType::F16: return "fp16";
        case DType::BF16: return "bf16";
    }
    return "?";
}

DType parse_dtype(std::string_view name) {
    if (name == "fp32" || name == "float32") return DType::F32;
    if (name == "fp16" || name == "float16") return DType::F16;
    if (name == "bf16" || name == "bfloat16") return DType::BF16;
    GPT_THROW(UsageError, "unknown dtype '", name, "' (expected fp32, fp16 or bf16)");
}

}  // namespace gpt
