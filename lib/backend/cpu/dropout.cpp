// Dropout, bias-dropout-add and its backward, with masks from Philox (never stored).
#include "backend/cpu/dropout_mask.hpp"

#include <cstring>
#include <vector>

#include "backend/cpu/common.hpp"
#include "backend/cpu/cpu_backend.hpp"

namespace gpt::cpu {

void dropout_multipliers(std::uint64_t seed, std::uint64_t first, std::int64_t n,
                         std::uint32_t threshold, float keep_scale, float* out) {
    // philox4x32_10 on kLanes consecutive blocks at once, round by round over lane arrays:
    // each round is one loop the compiler turns into vector multiplies (the scalar function's
    // loop over rounds hides that from the vectoriser). Same arithmetic as philox.hpp.
    constexpr int kLanes = 16;
    const std::uint64_t end = first + static_cast<std::uint64_t>(n);
    const std::uint64_t b_first = first >> 2, b_end = (end + 3) >> 2;
    for (std::uint64_t b0 = b_first; b0 < b_end; b0 += kLanes) {
        std::uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
        for (int l = 0; l < kLanes; ++l) {
            const std::uint64_t blk = b0 + static_cast<std::uint64_t>(l);
            c0[l] = static_cast<std::uint32_t>(blk);
            c1[l] = static_cast<std::uint32_t>(blk >> 32);
            c2[l] = 0u;
            c3[l] = 0u;
        }
        std::uint32_t k0 = static_cast<std::uint32_t>(seed);
        std::uint32_t k1 = static_cast<std::uint32_t>(seed >> 32);
        for (int r = 0; r < 10; ++r) {
#pragma omp simd
            for (int l = 0; l < kLanes; ++l) {
                const std::uint64_t p0 = static_cast<std::uint64_t>(0xD2511F53u) * c0[l];
                const std::uint64_t p1 = static_cast<std::uint64_t>(0xCD9E8D57u) * c2[l];
                const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1[l] ^ k0;
                const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3[l] ^ k1;
                c1[l] = static_cast<std::uint32_t>(p1);
                c3[l] = static_cast<std::uint32_t>(p0);
                c0[l] = n0;
                c2[l] = n2;
            }
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        // Element (b0 + l)*4 + q is lane q of block b0 + l.
        float vals[4 * kLanes];
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) {
            vals[l * 4 + 0] = c0[l] >= threshold ? keep_scale : 0.0f;
            vals[l * 4 + 1] = c1[l] >= threshold ? keep_scale : 0.0f;
            vals[l * 4 + 2] = c2[l] >= threshold ? keep_scale : 0.0f;
            vals[l * 4 + 3] = c3[l] >= threshold ? keep_scale : 0.0f;
        }
        const std::uint64_t e0 = b0 * 4;
        const std::uint64_t lo = e0 < first ? first : e0;
        const std::uint64_t hi = std::min<std::uint64_t>(e0 + 4 * kLanes, end);
        if (lo < hi) std::memcpy(out + (lo - first), vals + (lo - e0), (hi - lo) * sizeof(float));
    }
}

void CpuBackend::do_dropout_forward(const void* x, void* y, std::int64_t n, float p,
                                    std::uint64_t seed, std::uint64_t offset, DType dtype) {
    const std::uint32_t thr = dropout_threshold(p);
    const float keep_scale = 1.0f / (1.0f - p);
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        for_chunks(n, [&](std::int64_t i0, std::int64_t len) {
            float bx[kChunk], mask[kChunk];
            dropout_multipliers(seed, offset + i0, len, thr, keep_scale, mask);
            const float* xs = load<T>(x, i0, len, bx);
            float* ys = out_ptr<T>(y, i0, bx);
#pragma omp simd
            for (std::int64_t i = 0; i < len; ++i) ys[i] = xs[i] * mask[i];
            store<T>(bx, y, i0, len);
        });
    });
}

void CpuBackend::do_bias_dropout_add(const void* x, const void* bias, const void* residual,
                                     void* out, std::int64_t rows, std::int64_t cols, float p,
                                     std::uint64_t seed, std::uint64_t offset, DType dtype) {
    const std::uint32_t thr = dropout_threshold(p);
    const float keep_scale = 1.0f / (1.0f - p);
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        std::vector<float> b32(cols, 0.0f);
        if (bias) convert(static_cast<const T*>(bias), b32.data(), cols);
        for_row_chunks(rows, cols, [&](std::int64_t r, std::int64_t c0, std::int64_t len) {
            float bx[kChunk], br[kChunk], bo[kChunk], mask[kChunk];
            const std::int64_t i0 = r * cols + c0;
            const float* xs = load<T>(x, i0, len, bx);
            const float* rs = load<T>(residual, i0, len, br);
            float* os = out_ptr<T>(out, i0, bo);
            const float* bb = b32.data() + c0;
            if (p > 0.0f) {
                dropout_multipliers(seed, offset + i0, len, thr, keep_scale, mask);
#pragma omp simd
                for (std::int64_t i = 0; i < len; ++i) os[i] = rs[i] + (xs[i] + bb[i]) * mask[i];
            } else {
#pragma omp simd
                for (std::int64_t i = 0; i < len; ++i) os[i] = rs[i] + (xs[i] + bb[i]);
            }
            store<T>(bo, out, i0, len);
        });
    });
}

}  // namespace gpt::cpu
