// Element types of parameters, activations and gradients.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpt {

enum class DType { F32, F16, BF16 };

constexpr std::size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }
std::string_view dtype_name(DType t);
DType parse_dtype(std::string_view name);  // "fp32" | "fp16" | "bf16"; throws UsageError

}  // namespace gpt
