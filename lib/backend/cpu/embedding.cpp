// Word embeddings (vocab-parallel shard) and learned position embeddings.
#include <cstring>

#include "backend/cpu/common.hpp"
#include "backend/cpu/cpu_backend.hpp"

namespace gpt::cpu {

void CpuBackend::do_embedding_forward(const std::int32_t* tokens, const void* table, void* out,
                                      std::int64_t b, std::int64_t s, std::int64_t h,
                                      std::int64_t vocab_start, std::int64_t vocab_end,
                                      DType dtype) {
    const std::size_t row_bytes = static_cast<std::size_t>(h) * dtype_size(dtype);
    const char* tab = static_cast<const char*>(table);
    char* o = static_cast<char*>(out);
#pragma omp parallel for schedule(static) if (b * s * h >= kParallelMin)
    for (std::int64_t t = 0; t < s * b; ++t) {
        const std::int64_t si = t / b, bi = t % b;
        const std::int64_t id = tokens[bi * s + si];
        char* dst = o + t * row_bytes;
        if (id >= vocab_start && id < vocab_end)
            std::memcpy(dst, tab + (id - vocab_start) * row_bytes, row_bytes);
        else
            std::memset(dst, 0, row_bytes);  // all-bit-zero is +0 in every dtype
    }
}

void CpuBackend::do_embedding_backward(const std::int32_t* tokens, const void* dout, float* dtable,
                                       std::int64_t b, std::int64_t s, std::int64_t h,
                                       std::int64_t vocab_start, std::int64_t vocab_end,
                                       DType dtype) {
    // Repeated tokens hit the same table row, so threads split the hidden dim instead of the
    // tokens: no two threads touch one element, and tokens are added in a fixed order.
    const std::int64_t block = std::min<std::int64_t>(
        kChunk, std::max<std::int64_t>(16, (h / max_threads() + 15) / 16 * 16));
    const std::int64_t nb = (h + block - 1) / block;
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
#pragma omp parallel for schedule(static) if (b * s * h >= kParallelMin)
        for (std::int64_t blk = 0; blk < nb; ++blk) {
            const std::int64_t c0 = blk * block, len = std::min(block, h - c0);
            float buf[kChunk];
            for (std::int64_t t = 0; t < s * b; ++t) {
                const std::int64_t si = t / b, bi = t % b;
                const std::int64_t id = tokens[bi * s + si];
                if (id < vocab_start || id >= vocab_end) continue;
                const float* d = load<T>(dout, t * h + c0, len, buf);
                float* row = dtable + (id - vocab_start) * h + c0;
#pragma omp simd
                for (std::int64_t i = 0; i < len; ++i) row[i] += d[i];
            }
        }
    });
}

void CpuBackend::do_position_embedding_forward(const void* table, void* out, std::int64_t b,
                                               std::int64_t s, std::int64_t h,
                                               std::int64_t first_position, DType dtype) {
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        for_row_chunks(s * b, h, [&](std::int64_t t, std::int64_t c0, std::int64_t len) {
            float bp[kChunk], bo[kChunk];
            const std::int64_t si = t / b;
            const float* pe = load<T>(table, (first_position + si) * h + c0, len, bp);
            const float* os = load<T>(out, t * h + c0, len, bo);
            float* od = out_ptr<T>(out, t * h + c0, bo);
#pragma omp simd
            for (std::int64_t i = 0; i < len; ++i) od[i] = os[i] + pe[i];
            store<T>(bo, out, t * h + c0, len);
        });
    });
}

void CpuBackend::do_position_embedding_backward(const void* dout, float* dtable, std::int64_t b,
                                                std::int64_t s, std::int64_t h,
                                                std::int64_t first_position, DType dtype) {
    // One sequence position per row of the table: rows are independent across threads.
    dispatch(dtype, [&](auto tag) {
        using T = decltype(tag);
        for_row_chunks(s, h, [&](std::int64_t si, std::int64_t c0, std::int64_t len) {
            float buf[kChunk];
            float* row = dtable + (first_position + si) * h + c0;
            for (std::int64_t bi = 0; bi < b; ++bi) {
                const float* d = load<T>(dout, (si * b + bi) * h + c0, len, buf);
#pragma omp simd
                for (std::int64_t i = 0; i < len; ++i) row[i] += d[i];
            }
        });
    });
}

}  // namespace gpt::cpu
