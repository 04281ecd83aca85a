// Host-side index arithmetic of KvModel's grouped cache (kv_model.hpp), kept apart so the
// tests can hold it to the layouts it reads.
//
// The cache of a layer is two arrays, K and V, each [max_len, b, ng, hn]: one key and one
// value per query group, not per head (a group's heads share them). They are filled by row
// gathers (Backend::embedding_forward over a buffer viewed as a table of hn-wide rows: an
// exact copy in every dtype) from
//   the prompt pass:  the attention's activation [n, b, np, 3, hn] (after qkv_expand, so
//                     rotated), taking each group's first head's key and value;
//   a one-token step: the grouped projection [b, ng, np/ng + 2, hn] (rotated), taking the
//                     group's key and value rows.
// A one-token step's rotary embedding at its position p (the expand op rotates row r by
// position r / b, counting from 0) is one GEMM of the grouped projection's rows with the
// rotation matrix of position p, in fp32 with the expand op's fp32 angles.
#pragma once

#include <cstdint>
#include <vector>

namespace gpt::inference {

// For rows [s b] of the attention's [rows, ng * hpg, 3, hn]: the hn-wide row index of each
// group's key (value: + 1), in cache order [rows, ng].
std::vector<std::int32_t> expanded_key_rows(std::int64_t rows, std::int64_t groups, std::int64_t heads_per_group);
// For rows [b] of the grouped [rows, ng, hpg + 2, hn]: the row index of each group's key
// (value: + 1), in cache order [rows, ng].
std::vector<std::int32_t> grouped_key_rows(std::int64_t rows, std::int64_t groups, std::int64_t heads_per_group);
// Row index + 1 of every entry (the values next to the keys).
std::vector<std::int32_t> next_rows(std::vector<std::int32_t> rows);

// M (hn x hn, row-major) with y = x M the rotary embedding of one head's vector x at
// position pos: Megatron's rope on dims [0, rotary_dim) (pairs (i, i + rotary_dim/2), or
// (2i, 2i + 1) when interleaved) by the fp32 angle pos * inv_freq(i), identity beyond.
std::vector<float> rope_matrix(std::int64_t hn, std::int64_t rotary_dim, float base, bool interleaved,
                               std::int64_t pos);

}  // namespace gpt::inference
