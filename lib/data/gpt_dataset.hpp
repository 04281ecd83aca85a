// Training samples for GPT: Megatron's GPTDataset (split, document/sample/shuffle indices over
// an indexed dataset, cached on disk), blends of several, a mock source, and the per-rank
// micro-batch loader. This header is the data interface the trainer uses.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mpi.h>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "data/index_cache.hpp"

namespace gpt::data {

class IndexedDataset;

// A source of training samples (GPT, blended, or mock).
class SampleDataset {
public:
    virtual ~SampleDataset() = default;
    virtual std::int64_t size() const = 0;  // number of samples
    virtual int seq_length() const = 0;
    // Writes seq_length + 1 token ids (inputs and, shifted by one, labels).
    virtual void sample(std::int64_t index, std::int32_t* out) const = 0;
};

// valid/test are null when their split is 0.
struct GptDatasets {
    std::unique_ptr<SampleDataset> train, valid, test;
};

// Builds from cfg (data_path with optional blend weights "0.3 pathA 0.7 pathB", split,
// data_cache_path, mock_data), the sequence length, seed and the samples each split must
// provide (Megatron: train = train_iters*global_batch, valid = (train_iters/eval_interval+1)
// *eval_iters*global_batch, test = eval_iters*global_batch). Index caches are built by rank 0
// of comm and then mapped by every rank: collective over comm (MPI_COMM_NULL: this process
// alone). mock_vocab_size bounds the mock tokens (the tokenizer's unpadded vocab by default).
GptDatasets build_gpt_datasets(const gpt::DataConfig& cfg, int seq_length, std::uint64_t seed,
                               std::array<std::int64_t, 3> num_samples, MPI_Comm comm,
                               int mock_vocab_size = 50257);

// One split of one indexed dataset as GptDataset reads it: its sequences, the samples asked
// of it and the folder of its cache file ("": <prefix>/cache/GPTDataset_indices).
struct SplitSpec {
    std::shared_ptr<const IndexedDataset> data;
    std::string split_name;  // "train", "valid", "test": names the cache file
    std::int64_t first = 0, last = 0;
    int seq_length = 0;
    std::uint64_t seed = 0;
    std::int64_t num_samples = 0;
    std::string cache_dir;
};

// Builds the cache file of each spec that is missing or damaged, on a few threads (what
// GptDataset's rank 0 does one at a time; the fsyncs of a blend's hundreds of small files
// overlap, as Megatron's --num-dataset-builder-threads builds in parallel). Errors are left
// for GptDataset to raise on every rank; returns the paths of the files it built.
std::vector<std::string> build_index_caches(const std::vector<SplitSpec>& specs);

// Megatron's GPTDataset over the sequences [first, last) of one indexed dataset.
class GptDataset : public SampleDataset {
public:
    // split_name names the cache file ("train", "valid", "test"); cache_dir "" means
    // <prefix>/cache/GPTDataset_indices as in Megatron. Collective over comm: its rank 0
    // builds the index cache when it is missing, truncated or foreign (index_cache.hpp), the
    // other ranks wait for it (through the watchdog's bounded wait) and then map it. An empty
    // range is a DataError naming the split (the caller skips splits that need no samples).
    // built_here: the cache files this process has just built and fsynced (build_index_caches'
    // result): its own output, mapped without checking it again value by value.
    GptDataset(std::shared_ptr<const IndexedDataset> data, const std::string& split_name, std::int64_t first,
               std::int64_t last, int seq_length, std::uint64_t seed, std::int64_t num_samples,
               const std::string& cache_dir, MPI_Comm comm, const std::vector<std::string>& built_here = {});

    std::int64_t size() const override { return cache_.shuffle_index().size(); }
    int seq_length() const override { return seq_length_; }
    void sample(std::int64_t index, std::int32_t* out) const override;

    std::int64_t num_epochs() const { return cache_.num_epochs(); }
    std::int64_t tokens_per_epoch() const { return tokens_; }
    // Whether this process built the cache file (false: it was there, or another rank built it).
    bool built_cache() const { return built_; }
    const IndexView& document_index() const { return cache_.document_index(); }
    const IndexView& sample_index() const { return cache_.sample_index(); }
    const IndexView& shuffle_index() const { return cache_.shuffle_index(); }
    const std::string& cache_path() const { return cache_path_; }

private:
    void validate(std::int64_t first, std::int64_t last, std::int64_t num_samples) const;

    std::shared_ptr<const IndexedDataset> data_;
    int seq_length_;
    std::int64_t first_ = 0;
    std::int64_t tokens_ = 0;
    bool built_ = false;
    std::string cache_path_;
    MappedIndexCache cache_;
};

// Megatron's BlendedDataset: `size` samples drawn from the datasets in proportion to weights.
// Which dataset each sample of a blend comes from, and which of that dataset's samples.
struct BlendingIndices {
    std::vector<std::int16_t> dataset;
    std::vector<std::int64_t> sample;
};
// Megatron's build_blending_indices over the weights normalised to sum 1 (UsageError for a
// negative weight or all zero). It needs no dataset, so a builder may run it beside the caches.
BlendingIndices blending_indices(std::vector<double> weights, std::int64_t size);

class BlendedDataset : public SampleDataset {
public:
    BlendedDataset(std::vector<std::unique_ptr<SampleDataset>> datasets, std::vector<double> weights, std::int64_t size);
    // With the indices computed already (blending_indices of the same weights).
    BlendedDataset(std::vector<std::unique_ptr<SampleDataset>> datasets, BlendingIndices indices);
    std::int64_t size() const override { return static_cast<std::int64_t>(dataset_index_.size()); }
    int seq_length() const override { return datasets_.front()->seq_length(); }
    void sample(std::int64_t index, std::int32_t* out) const override;
    const std::vector<std::unique_ptr<SampleDataset>>& parts() const { return datasets_; }
    // Which dataset sample `index` comes from.
    int dataset_of(std::int64_t index) const { return dataset_index_.at(static_cast<std::size_t>(index)); }

private:
    void adopt(BlendingIndices indices);  // checks them against the parts and keeps them
    std::vector<std::unique_ptr<SampleDataset>> datasets_;
    std::vector<std::int16_t> dataset_index_;
    std::vector<std::int64_t> dataset_sample_index_;
};

// No samples (a blend part of weight 0): the blend never draws from it.
class EmptyDataset : public SampleDataset {
public:
    explicit EmptyDataset(int seq_length) : seq_length_(seq_length) {}
    std::int64_t size() const override { return 0; }
    int seq_length() const override { return seq_length_; }
    void sample(std::int64_t index, std::int32_t*) const override;

private:
    int seq_length_;
};

// Megatron's --mock-data: deterministic synthetic tokens in [0, vocab_size), no files. The
// samples look like documents (runs of tokens ended by vocab_size - 1, the EOD in GPT-2).
class MockGptDataset : public SampleDataset {
public:
    MockGptDataset(std::int64_t num_samples, int seq_length, std::uint64_t seed, int vocab_size);
    std::int64_t size() const override { return num_samples_; }
    int seq_length() const override { return seq_length_; }
    void sample(std::int64_t index, std::int32_t* out) const override;

private:
    std::int64_t num_samples_;
    int seq_length_;
    std::uint64_t seed_;
    int vocab_size_;
};

// Megatron's pretraining sampler: each micro-step covers micro_batch*dp_size consecutive sample
// indices from consumed_samples; data-parallel rank r takes [r*mbs, (r+1)*mbs) of them;
// consumed advances by mbs*dp_size. Running past the dataset is a DataError.
class MicroBatchLoader {
public:
    MicroBatchLoader(const SampleDataset& ds, int micro_batch_size, int dp_rank, int dp_size, std::int64_t consumed_samples);
    void next(std::int32_t* tokens);  // [micro_batch_size, seq_length+1], row-major
    std::int64_t consumed_samples() const { return consumed_; }

private:
    const SampleDataset& ds_;
    int mbs_, dp_rank_, dp_size_;
    std::int64_t consumed_;
};

}  // namespace gpt::data
