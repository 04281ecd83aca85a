// The datasets of a run from either form Megatron accepts: one blend (--data-path) cut by
// --split, or a blend per split (--train-data-path, --valid-data-path, --test-data-path),
// and with --multiple-validation-sets one validation set per --valid-data-path prefix.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "data/gpt_dataset.hpp"

namespace gpt::data {

struct NamedDataset {
    std::string name;  // "": the single validation set; else the prefix's file name
    std::unique_ptr<SampleDataset> data;
};

struct SplitDatasets {
    std::unique_ptr<SampleDataset> train, test;  // null when the run has none
    std::vector<NamedDataset> valid;             // empty when the run has none
};

// A per-split blend is the whole of its data sets, built as GPTDataset(split = that split)
// like Megatron's blend_per_split: --valid-data-path X reads the samples
// --data-path X --split 0,100,0 reads. Arguments as build_gpt_datasets (collective over comm);
// with --multiple-validation-sets each set gets num_samples[1].
SplitDatasets build_split_datasets(const gpt::DataConfig& cfg, int seq_length, std::uint64_t seed,
                                   std::array<std::int64_t, 3> num_samples, MPI_Comm comm,
                                   int mock_vocab_size = 50257);

}  // namespace gpt::data
