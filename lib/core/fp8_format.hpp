// The FP8 element formats and their ranges: what device-agnostic interfaces (the Backend's
// FP8 GEMM operands and casts) need to name a format. C++17, so CUDA sources include it; the
// host-side conversions are in fp8.hpp.
#pragma once

namespace gpt {

enum class Fp8Format { E4M3, E5M2 };

// The largest finite value of the format: 448 (E4M3), 57344 (E5M2). FP8 scaling maps a
// tensor's absolute maximum to it (divided by 2^margin).
inline float fp8_max(Fp8Format format) { return format == Fp8Format::E4M3 ? 448.0f : 57344.0f; }

}  // namespace gpt
