// Megatron's tools/merge_datasets.py: concatenate indexed datasets into one.
#pragma once

#include <string>
#include <vector>

namespace gpt::data {

// The dataset prefixes in a folder (every <name>.bin/<name>.idx pair), sorted by name as
// Megatron's merge orders them. A .bin or .idx without its partner is an IoError.
std::vector<std::string> dataset_prefixes_in_folder(const std::string& folder);

// Writes <output_prefix>.bin/.idx holding every sequence and document of the inputs in order.
// Merging the parts of a corpus gives the same bytes as preprocessing it whole.
void merge_datasets(const std::vector<std::string>& input_prefixes, const std::string& output_prefix);

}  // namespace gpt::data
