// Helpers for checkpoint tests: deterministic tensor contents, packing a selection's
// elements in the order the checkpoint layer expects, and dtype byte buffers.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ckpt/selection.hpp"
#include "ckpt/tensor_slice.hpp"
#include "core/half.hpp"

namespace gpt::ckpt::test {

// Element `flat` of tensor `id` at save `seed`: multiples of 1/4 below 16, exact in fp16 and bf16.
inline float element_value(int id, std::int64_t flat, std::int64_t seed = 0) {
    return static_cast<float>((flat * 7 + id * 13 + seed) % 61) / 4.0f;
}

// fp32 values of the selected elements, packed in Selection::boxes order.
inline std::vector<float> packed_values(int id, const Shape& shape, const Selection& sel, std::int64_t seed = 0) {
    std::vector<float> out;
    for (const Box& b : sel.boxes(shape))
        for_each_run(shape, b, [&](std::int64_t start, std::int64_t len) {
            for (std::int64_t i = 0; i < len; ++i) out.push_back(element_value(id, start + i, seed));
        });
    return out;
}

// Raw bytes of `values` stored as dtype.
inline std::vector<unsigned char> to_bytes(const std::vector<float>& values, DType t) {
    std::vector<unsigned char> out(values.size() * dtype_size(t));
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (t == DType::F32) {
            std::memcpy(out.data() + 4 * i, &values[i], 4);
        } else {
            const std::uint16_t b = t == DType::F16 ? float_to_half_bits(values[i]) : float_to_bf16_bits(values[i]);
            std::memcpy(out.data() + 2 * i, &b, 2);
        }
    }
    return out;
}

inline std::vector<float> from_bytes(const std::vector<unsigned char>& bytes, DType t) {
    std::vector<float> out(bytes.size() / dtype_size(t));
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (t == DType::F32) {
            std::memcpy(&out[i], bytes.data() + 4 * i, 4);
        } else {
            std::uint16_t b;
            std::memcpy(&b, bytes.data() + 2 * i, 2);
            out[i] = t == DType::F16 ? half_bits_to_float(b) : bf16_bits_to_float(b);
        }
    }
    return out;
}

// [lo, hi) of n items for part p of parts (uneven splits allowed).
inline std::pair<std::int64_t, std::int64_t> split_range(std::int64_t n, int p, int parts) {
    return {n * p / parts, n * (p + 1) / parts};
}

inline int comm_rank(MPI_Comm c) {
    int r = 0;
    MPI_Comm_rank(c, &r);
    return r;
}
inline int comm_size(MPI_Comm c) {
    int s = 1;
    MPI_Comm_size(c, &s);
    return s;
}

}  // namespace gpt::ckpt::test
