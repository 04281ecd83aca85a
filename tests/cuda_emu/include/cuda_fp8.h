// Emulated cuda_fp8.h (tests/cuda_emu): the one conversion our kernels call, with the
// project's reference arithmetic (lib/core/fp8.hpp: round to nearest even; with
// __NV_SATFINITE, values beyond the largest finite one and infinities saturate, NaN gives
// 0x7F), which is what the hardware's cvt.rn.satfinite does. __NV_NOSAT is not emulated.
#pragma once

#include <cstdint>

#include "core/errors.hpp"
#include "core/fp8.hpp"

typedef unsigned char __nv_fp8_storage_t;
enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE };
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 };

inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t saturate,
                                                __nv_fp8_interpretation_t kind) {
    GPT_REQUIRE(saturate == __NV_SATFINITE, InternalError,
                "emulated __nv_cvt_float_to_fp8: only __NV_SATFINITE is emulated");
    return gpt::float_to_fp8(x, kind == __NV_E4M3 ? gpt::Fp8Format::E4M3 : gpt::Fp8Format::E5M2);
}
