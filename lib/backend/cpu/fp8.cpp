// The FP8 casts (issue 34) on the CPU: the reference arithmetic of core/fp8.hpp (round to
// nearest even, saturating, as Hopper's cvt.rn.satfinite) over rows staged to fp32, the
// transposed copy written in square tiles so both sides stay in cache, and a NaN-sticky amax
// taken on the bits of |x| (for non-negative floats the integer order is the float order,
// and every NaN sorts above infinity).
#include <bit>
#include <cmath>

#include "backend/cpu/common.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "core/fp8_scaling.hpp"

namespace gpt::cpu {

namespace {

constexpr std::int64_t kTile = 64;  // rows x columns of x per transposed tile

inline std::uint32_t abs_bits(float v) { return std::bit_cast<std::uint32_t>(v) & 0x7fffffffu; }

// max over the bits of |x| of n fp32 values, and the combination of two such maxima.
inline std::uint32_t amax_bits(const float* x, std::int64_t n) {
    std::uint32_t m = 0;
#pragma omp simd reduction(max : m)
    for (std::int64_t i = 0; i < n; ++i) m = std::max(m, abs_bits(x[i]));
    return m;
}

inline void merge_amax(float* amax, std::uint32_t bits) {
    if (bits > abs_bits(*amax)) *amax = std::bit_cast<float>(bits);
}

}  // namespace

void CpuBackend::do_cast_to_fp8(const void* x, DType dtype, std::int64_t rows, std::int64_t cols,
                                Fp8Format format, const float* scale, std::uint8_t* q,
                                std::uint8_t* q_t, float* amax) {
    const float s = *scale;
    const std::uint32_t bits = dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        std::uint32_t m = 0;
        // Tiles of kTile rows: each row staged to fp32 once, quantised into q and, column by
        // column of the tile, into q_t's rows.
#pragma omp parallel for schedule(static) reduction(max : m) if (rows * cols >= kParallelMin)
        for (std::int64_t r0 = 0; r0 < rows; r0 += kTile) {
            const std::int64_t nr = std::min(kTile, rows - r0);
            float buf[kChunk];
            for (std::int64_t c0 = 0; c0 < cols; c0 += kChunk) {
                const std::int64_t nc = std::min(kChunk, cols - c0);
                for (std::int64_t r = r0; r < r0 + nr; ++r) {
                    const float* v = load<T>(x, r * cols + c0, nc, buf);
                    m = std::max(m, amax_bits(v, nc));
                    for (std::int64_t c = 0; c < nc; ++c) {
                        const std::uint8_t code = float_to_fp8(v[c] * s, format);
                        if (q) q[r * cols + c0 + c] = code;
                        if (q_t) q_t[(c0 + c) * rows + r] = code;
                    }
                }
            }
        }
        return m;
    });
    if (amax) merge_amax(amax, bits);
}

void CpuBackend::do_amax(const void* x, DType dtype, std::int64_t n, float* amax) {
    const std::uint32_t bits = dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        std::uint32_t m = 0;
#pragma omp parallel for schedule(static) reduction(max : m) if (n >= kParallelMin)
        for (std::int64_t i0 = 0; i0 < n; i0 += kChunk) {
            float buf[kChunk] = {};  // (initialised: GCC cannot see convert() fill it)
            const std::int64_t len = std::min(kChunk, n - i0);
            m = std::max(m, amax_bits(load<T>(x, i0, len, buf), len));
        }
        return m;
    });
    merge_amax(amax, bits);
}

void CpuBackend::do_fp8_current_scales(const float* amax, float* scale, float* scale_inv,
                                       std::int64_t n, Fp8Format format, float if_overflow) {
    for (std::int64_t i = 0; i < n; ++i) {
        scale[i] = current_scale(amax[i], format, if_overflow);
        scale_inv[i] = 1.0f / scale[i];
    }
}

}  // namespace gpt::cpu
