// Bias add / bias gradient, add, accumulate, scale and casts.
#include <vector>

#include "backend/cpu/common.hpp"
#include "backend/cpu/cpu_backend.hpp"

namespace gpt::cpu {

void CpuBackend::do_bias_add(void* x, const void* bias, std::int64_t rows, std::int64_t cols,
                             DType dtype) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        std::vector<float> b32(cols);
        convert(static_cast<const T*>(bias), b32.data(), cols);
        for_row_chunks(rows, cols, [&](std::int64_t r, std::int64_t c0, std::int64_t len) {
            float bx[kChunk];
            const std::int64_t i0 = r * cols + c0;
            const float* xs = load<T>(x, i0, len, bx);
            float* ys = out_ptr<T>(x, i0, bx);
            const float* bb = b32.data() + c0;
#pragma omp simd
            for (std::int64_t i = 0; i < len; ++i) ys[i] = xs[i] + bb[i];
            store<T>(bx, x, i0, len);
        });
    });
}

void CpuBackend::do_bias_grad(const void* dy, float* dbias, std::int64_t rows, std::int64_t cols,
                              DType dtype) {
    // Threads own column blocks and walk all rows: no reduction between threads, and the
    // summation order (row order) is the same for any thread count.
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        const std::int64_t block = std::min<std::int64_t>(
            kChunk, std::max<std::int64_t>(16, (cols / max_threads() + 15) / 16 * 16));
        const std::int64_t nb = (cols + block - 1) / block;
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMin)
        for (std::int64_t bi = 0; bi < nb; ++bi) {
            const std::int64_t c0 = bi * block, len = std::min(block, cols - c0);
            float acc[kChunk] = {};
            float buf[kChunk];
            for (std::int64_t r = 0; r < rows; ++r) {
                const float* d = load<T>(dy, r * cols + c0, len, buf);
#pragma omp simd
                for (std::int64_t i = 0; i < len; ++i) acc[i] += d[i];
            }
            for (std::int64_t i = 0; i < len; ++i) dbias[c0 + i] += acc[i];
        }
    });
}

void CpuBackend::do_add(const void* a, const void* b, void* y, std::int64_t n, DType dtype) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        map_elements<T>(a, b, y, n, [](float u, float v) { return u + v; });
    });
}

void CpuBackend::do_accumulate_f32(const void* x, float* y, std::int64_t n, DType dtype) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        for_chunks(n, [&](std::int64_t i0, std::int64_t len) {
            float bx[kChunk];
            const float* xs = load<T>(x, i0, len, bx);
            float* ys = y + i0;
#pragma omp simd
            for (std::int64_t i = 0; i < len; ++i) ys[i] += xs[i];
        });
    });
}

void CpuBackend::do_scale(void* x, float alpha, std::int64_t n, DType dtype) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        for_chunks(n, [&](std::int64_t i0, std::int64_t len) {
            float bx[kChunk];
            const float* xs = load<T>(x, i0, len, bx);
            float* ys = out_ptr<T>(x, i0, bx);
#pragma omp simd
            for (std::int64_t i = 0; i < len; ++i) ys[i] = xs[i] * alpha;
            store<T>(bx, x, i0, len);
        });
    });
}

void CpuBackend::do_cast(const void* src, DType src_type, void* dst, DType dst_type,
                         std::int64_t n) {
    // Through fp32: exact for 16-bit -> fp32, and one correctly rounded step otherwise
    // (fp16 <-> bf16 goes through fp32 exactly, then rounds once).
    dispatch(src_type, [&](auto stag) {
        using S = decltype(stag);
        dispatch(dst_type, [&](auto dtag) {
            using D = decltype(dtag);
            for_chunks(n, [&](std::int64_t i0, std::int64_t len) {
                float buf[kChunk];
                const float* f = load<S>(src, i0, len, buf);
                if constexpr (std::is_same_v<D, float>)
                    std::copy(f, f + len, static_cast<float*>(dst) + i0);
                else
                    convert(f, static_cast<D*>(dst) + i0, static_cast<std::size_t>(len));
            });
        });
    });
}

}  // namespace gpt::cpu
