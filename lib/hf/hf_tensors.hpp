// What both Hugging Face mappings (gpt2_mapping, llama_mapping) do with a tensor beside the
// mapping itself: its shape in messages, its element count, reading it from the safetensors
// file checked against the shape config.json implies, and the vocabulary padding rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hf/safetensors.hpp"

namespace gpt::hf {

std::int64_t element_count(const std::vector<std::int64_t>& shape);
std::string shape_text(const std::vector<std::int64_t>& shape);  // "[a, b]"

// The values of tensor `name` of f (present: the caller names what needs it when not),
// DataError when its shape is not `shape`.
std::vector<float> read_with_shape(const SafetensorsFile& f, const std::string& name,
                                   const std::vector<std::int64_t>& shape);

// Rows [vocab, padded) of a (padded, hidden) embedding table: copies of the last real row
// (what an import fills the padding with; they are never a real token's).
void fill_padding_rows(float* table, std::int64_t vocab, std::int64_t padded, std::int64_t hidden);

}  // namespace gpt::hf
