#include "inference/kv_cache_layout.hpp"

#include <cmath>
#include <limits>

#include "backend/decoder_ops_common.hpp"
#include "core/errors.hpp"

namespace gpt::inference {

namespace {

std::int32_t row_index(std::int64_t r) {
    // The gather takes int32 ids: a cache that outgrows them is refused, not wrapped.
    GPT_REQUIRE(r < std::numeric_limits<std::int32_t>::max(), UsageError, "the KV cache's ", r,
                " rows exceed the gather's 32-bit row index: use a smaller --batch-size or shorter sequences");
    return static_cast<std::int32_t>(r);
}

}  // namespace

std::vector<std::int32_t> expanded_key_rows(std::int64_t rows, std::int64_t groups, std::int64_t heads_per_group) {
    std::vector<std::int32_t> out;
    out.reserve(static_cast<std::size_t>(rows * groups));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t g = 0; g < groups; ++g)
            out.push_back(row_index(((r * groups + g) * heads_per_group) * 3 + 1));  // [np, 3]: q, k, v
    return out;
}

std::vector<std::int32_t> grouped_key_rows(std::int64_t rows, std::int64_t groups, std::int64_t heads_per_group) {
    std::vector<std::int32_t> out;
    out.reserve(static_cast<std::size_t>(rows * groups));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t g = 0; g < groups; ++g)
            out.push_back(row_index((r * groups + g) * (heads_per_group + 2) + heads_per_group));  // after the queries
    return out;
}

std::vector<std::int32_t> next_rows(std::vector<std::int32_t> rows) {
    for (std::int32_t& r : rows) ++r;
    return rows;
}

std::vector<float> rope_matrix(std::int64_t hn, std::int64_t rotary_dim, float base, bool interleaved,
                               std::int64_t pos) {
    std::vector<float> m(static_cast<std::size_t>(hn * hn), 0.0f);
    auto at = [&](std::int64_t k, std::int64_t j) -> float& { return m[static_cast<std::size_t>(k * hn + j)]; };
    for (std::int64_t j = rotary_dim; j < hn; ++j) at(j, j) = 1.0f;
    const std::int64_t half = rotary_dim / 2;
    for (std::int64_t i = 0; i < half; ++i) {
        // The angle and its cos/sin exactly as the expand op forms them (fp32).
        const float angle = static_cast<float>(pos) * rope_inv_freq(base, rotary_dim, i);
        const float c = std::cos(angle), s = std::sin(angle);
        const std::int64_t i0 = interleaved ? 2 * i : i, i1 = interleaved ? 2 * i + 1 : i + half;
        // y0 = x0 c - x1 s, y1 = x1 c + x0 s
        at(i0, i0) = c;
        at(i1, i0) = -s;
        at(i0, i1) = s;
        at(i1, i1) = c;
    }
    return m;
}

}  // namespace gpt::inference
