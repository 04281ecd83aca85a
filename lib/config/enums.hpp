// The enum-valued options (Megatron's choices flags), each with the one table of its
// spellings: the option parser, the validator's messages, the printed arguments table and
// the checkpoint's saved arguments all read and write these names, so a value is spelled
// exactly as Megatron spells it everywhere.
#pragma once

#include <array>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "core/fp8_scaling.hpp"

namespace gpt {

enum class PositionEmbeddingType { LearnedAbsolute, Rope };
enum class Normalization { LayerNorm, RMSNorm };
// --recompute-granularity; None is Megatron's default (the flag not given). The planner and
// the model use this same enum for the recompute mode they act on.
enum class RecomputeGranularity { None, Selective, Full };
enum class RecomputeMethod { None, Uniform, Block };
enum class DistributedBackend { Nccl, Mpi };
enum class DeviceKind { Auto, Cuda, Cpu };
enum class OptimizerType { Adam };
enum class LrDecayStyle { Constant, Linear, Cosine, InverseSquareRoot, Wsd };
// WSD's annealing phase (--lr-wsd-decay-style) and --weight-decay-incr-style: Megatron's choices.
enum class WsdDecayStyle { Exponential, Linear, Cosine, MinusSqrt };
enum class WeightDecayIncrStyle { Constant, Linear, Cosine };
enum class TokenizerType { GPT2BPETokenizer, TikTokenizer };
enum class LogLevel { Trace, Debug, Info, Warning, Error };
enum class PlanFormat { Table, Json };
enum class PlanDevice { Auto, A100_40GB, A100_80GB, H100_80GB, H200, Cpu };
enum class TimingLogOption { MinMax, Max, All };
// FP8 (issue 34). --fp8-format (Megatron's args.fp8, Transformer Engine's recipe.Format): which
// element format each FP8 GEMM operand takes: e4m3 for all of them, or hybrid (E4M3
// activations and weights, E5M2 gradients); None (the flag not given) is FP8 off.
enum class Fp8Scheme { None, E4M3, Hybrid };
// --fp8-recipe: every choice Megatron lists, so the ones this build does not implement
// (mxfp8, blockwise, custom) are refused by name with the reason (config/validate_fp8.cpp)
// rather than as an unknown value. --fp8-amax-compute-algo is core's AmaxAlgo.
enum class Fp8Recipe { Tensorwise, Delayed, Mxfp8, Blockwise, Custom };

// EnumNames<E>::names: every value of E with its spelling, in the order the flag's help and
// error messages list them.
template <typename E>
struct EnumNames;

#define GPT_ENUM_NAMES(E, N, ...)                                                   \
    template <>                                                                     \
    struct EnumNames<E> {                                                           \
        static constexpr std::array<std::pair<E, std::string_view>, N> names{{__VA_ARGS__}}; \
    }

GPT_ENUM_NAMES(PositionEmbeddingType, 2, {PositionEmbeddingType::LearnedAbsolute, "learned_absolute"},
               {PositionEmbeddingType::Rope, "rope"});
GPT_ENUM_NAMES(Normalization, 2, {Normalization::LayerNorm, "LayerNorm"}, {Normalization::RMSNorm, "RMSNorm"});
// None prints as "" (the arguments table shows it as None, as Megatron's does).
GPT_ENUM_NAMES(RecomputeGranularity, 3, {RecomputeGranularity::None, ""},
               {RecomputeGranularity::Full, "full"}, {RecomputeGranularity::Selective, "selective"});
GPT_ENUM_NAMES(RecomputeMethod, 3, {RecomputeMethod::None, ""}, {RecomputeMethod::Uniform, "uniform"},
               {RecomputeMethod::Block, "block"});
GPT_ENUM_NAMES(DistributedBackend, 2, {DistributedBackend::Nccl, "nccl"}, {DistributedBackend::Mpi, "mpi"});
GPT_ENUM_NAMES(DeviceKind, 3, {DeviceKind::Auto, "auto"}, {DeviceKind::Cuda, "cuda"}, {DeviceKind::Cpu, "cpu"});
GPT_ENUM_NAMES(OptimizerType, 1, {OptimizerType::Adam, "adam"});
GPT_ENUM_NAMES(LrDecayStyle, 5, {LrDecayStyle::Constant, "constant"}, {LrDecayStyle::Linear, "linear"},
               {LrDecayStyle::Cosine, "cosine"}, {LrDecayStyle::InverseSquareRoot, "inverse-square-root"},
               {LrDecayStyle::Wsd, "WSD"});
GPT_ENUM_NAMES(WsdDecayStyle, 4, {WsdDecayStyle::Exponential, "exponential"}, {WsdDecayStyle::Linear, "linear"},
               {WsdDecayStyle::Cosine, "cosine"}, {WsdDecayStyle::MinusSqrt, "minus_sqrt"});
GPT_ENUM_NAMES(WeightDecayIncrStyle, 3, {WeightDecayIncrStyle::Constant, "constant"},
               {WeightDecayIncrStyle::Linear, "linear"}, {WeightDecayIncrStyle::Cosine, "cosine"});
GPT_ENUM_NAMES(TokenizerType, 2, {TokenizerType::GPT2BPETokenizer, "GPT2BPETokenizer"},
               {TokenizerType::TikTokenizer, "TikTokenizer"});
GPT_ENUM_NAMES(LogLevel, 5, {LogLevel::Trace, "trace"}, {LogLevel::Debug, "debug"}, {LogLevel::Info, "info"},
               {LogLevel::Warning, "warning"}, {LogLevel::Error, "error"});
GPT_ENUM_NAMES(PlanFormat, 2, {PlanFormat::Table, "table"}, {PlanFormat::Json, "json"});
GPT_ENUM_NAMES(PlanDevice, 6, {PlanDevice::Auto, "auto"}, {PlanDevice::A100_40GB, "a100-40gb"},
               {PlanDevice::A100_80GB, "a100-80gb"}, {PlanDevice::H100_80GB, "h100-80gb"},
               {PlanDevice::H200, "h200"}, {PlanDevice::Cpu, "cpu"});
GPT_ENUM_NAMES(TimingLogOption, 3, {TimingLogOption::MinMax, "minmax"}, {TimingLogOption::Max, "max"},
               {TimingLogOption::All, "all"});
// None prints as "" (None in the arguments table, as Megatron's args.fp8 = None).
GPT_ENUM_NAMES(Fp8Scheme, 3, {Fp8Scheme::None, ""}, {Fp8Scheme::E4M3, "e4m3"}, {Fp8Scheme::Hybrid, "hybrid"});
GPT_ENUM_NAMES(Fp8Recipe, 5, {Fp8Recipe::Tensorwise, "tensorwise"}, {Fp8Recipe::Delayed, "delayed"},
               {Fp8Recipe::Mxfp8, "mxfp8"}, {Fp8Recipe::Blockwise, "blockwise"}, {Fp8Recipe::Custom, "custom"});
GPT_ENUM_NAMES(AmaxAlgo, 2, {AmaxAlgo::MostRecent, "most_recent"}, {AmaxAlgo::Max, "max"});

#undef GPT_ENUM_NAMES

template <typename E>
concept OptionEnum = std::is_enum_v<E> && requires { EnumNames<E>::names; };

// The spelling of a value (the one the flag takes).
template <OptionEnum E>
constexpr std::string_view to_string(E value) {
    for (const auto& [v, name] : EnumNames<E>::names)
        if (v == value) return name;
    return "?";  // unreachable: every enumerator has a row
}

// "a, b or c": the allowed spellings, for help texts and messages ("" is left out: it is
// the flag not given).
template <OptionEnum E>
std::string allowed_values() {
    std::string list;
    for (const auto& [v, name] : EnumNames<E>::names)
        if (!name.empty()) list += (list.empty() ? "" : ", ") + std::string(name);
    return list;
}

// Streams (messages, logs) print a value as its flag spelling.
template <OptionEnum E>
std::ostream& operator<<(std::ostream& os, E value) {
    return os << to_string(value);
}

// One line naming the flag, the allowed values and what was given (a UsageError).
[[noreturn]] void throw_bad_enum(std::string_view flag, const std::string& allowed, std::string_view given);

// The value spelled `text`, or a UsageError "--flag must be one of a, b, got 'x'".
template <OptionEnum E>
E parse_enum(std::string_view text, std::string_view flag) {
    for (const auto& [v, name] : EnumNames<E>::names)
        if (name == text) return v;
    throw_bad_enum(flag, allowed_values<E>(), text);
}

}  // namespace gpt
