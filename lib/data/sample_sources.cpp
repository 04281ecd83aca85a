// BlendedDataset, EmptyDataset, MockGptDataset and MicroBatchLoader: the small SampleDataset pieces.
#include "core/errors.hpp"
#include "data/gpt_dataset.hpp"
#include "data/gpt_indices.hpp"

namespace gpt::data {

BlendingIndices blending_indices(std::vector<double> weights, std::int64_t size) {
    GPT_REQUIRE(!weights.empty(), UsageError, "a blend needs one weight per dataset");
    double sum = 0;
    for (double w : weights) {
        GPT_REQUIRE(w >= 0, UsageError, "blend weights must be >= 0");
        sum += w;
    }
    GPT_REQUIRE(sum > 0, UsageError, "blend weights must not all be 0");
    for (double& w : weights) w /= sum;
    BlendingIndices out;
    build_blending_indices(weights, size, out.dataset, out.sample);
    return out;
}

BlendedDataset::BlendedDataset(std::vector<std::unique_ptr<SampleDataset>> datasets, std::vector<double> weights,
                               std::int64_t size)
    : datasets_(std::move(datasets)) {
    GPT_REQUIRE(datasets_.size() == weights.size(), UsageError, "a blend needs one weight per dataset");
    adopt(blending_indices(std::move(weights), size));
}

BlendedDataset::BlendedDataset(std::vector<std::unique_ptr<SampleDataset>> datasets, BlendingIndices indices)
    : datasets_(std::move(datasets)) {
    adopt(std::move(indices));
}

void BlendedDataset::adopt(BlendingIndices indices) {
    GPT_REQUIRE(!datasets_.empty(), UsageError, "a blend needs one weight per dataset");
    for (const auto& d : datasets_)
        GPT_REQUIRE(d->seq_length() == datasets_.front()->seq_length(), InternalError, "blended datasets differ in seq_length");
    dataset_index_ = std::move(indices.dataset);
    dataset_sample_index_ = std::move(indices.sample);
    for (const std::int16_t d : dataset_index_)
        GPT_ASSERT(d >= 0 && static_cast<std::size_t>(d) < datasets_.size(), "blend index names dataset ", d, " of ",
                   datasets_.size());
    // Each part was sized with Megatron's 0.5% surplus; a part that is still too small is a bug.
    std::vector<std::int64_t> need(datasets_.size(), 0);
    for (std::size_t i = 0; i < dataset_index_.size(); ++i)
        need[static_cast<std::size_t>(dataset_index_[i])] = dataset_sample_index_[i] + 1;
    for (std::size_t d = 0; d < datasets_.size(); ++d)
        GPT_REQUIRE(need[d] <= datasets_[d]->size(), DataError, "blended dataset ", d, " has ", datasets_[d]->size(),
                    " samples but the blend draws ", need[d]);
}

void BlendedDataset::sample(std::int64_t index, std::int32_t* out) const {
    GPT_ASSERT(index >= 0 && index < size(), "sample ", index, " of ", size());
    const auto i = static_cast<std::size_t>(index);
    datasets_[static_cast<std::size_t>(dataset_index_[i])]->sample(dataset_sample_index_[i], out);
}

void EmptyDataset::sample(std::int64_t index, std::int32_t*) const {
    GPT_ASSERT(false, "sample ", index, " of an empty dataset");
}

MockGptDataset::MockGptDataset(std::int64_t num_samples, int seq_length, std::uint64_t seed, int vocab_size)
    : num_samples_(num_samples), seq_length_(seq_length), seed_(seed), vocab_size_(vocab_size) {
    GPT_REQUIRE(seq_length >= 1, UsageError, "seq-length must be >= 1");
    GPT_REQUIRE(vocab_size >= 2, UsageError, "mock data needs a vocabulary of at least 2 tokens");
    GPT_REQUIRE(num_samples >= 0, UsageError, "negative sample count");
}

void MockGptDataset::sample(std::int64_t index, std::int32_t* out) const {
    GPT_ASSERT(index >= 0 && index < num_samples_, "sample ", index, " of ", num_samples_);
    // splitmix64 of (seed, index, position): stateless, so any sample is computed alone.
    auto mix = [](std::uint64_t x) {
        x += 0x9E3779B97F4A7C15ull;
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
        return x ^ (x >> 31);
    };
    const std::uint64_t base = mix(seed_ ^ mix(static_cast<std::uint64_t>(index)));
    const std::int32_t eod = vocab_size_ - 1;
    for (int t = 0; t <= seq_length_; ++t) {
        const std::uint64_t r = mix(base + static_cast<std::uint64_t>(t));
        // About one token in 256 ends a "document".
        out[t] = (r & 0xFF) == 0 ? eod : static_cast<std::int32_t>((r >> 8) % static_cast<std::uint64_t>(eod));
    }
}

MicroBatchLoader::MicroBatchLoader(const SampleDataset& ds, int micro_batch_size, int dp_rank, int dp_size,
                                   std::int64_t consumed_samples)
    : ds_(ds), mbs_(micro_batch_size), dp_rank_(dp_rank), dp_size_(dp_size), consumed_(consumed_samples) {
    GPT_REQUIRE(micro_batch_size >= 1, UsageError, "micro-batch-size must be >= 1");
    GPT_REQUIRE(dp_size >= 1 && dp_rank >= 0 && dp_rank < dp_size, UsageError, "data-parallel rank ", dp_rank,
                " outside [0, ", dp_size, ")");
    GPT_REQUIRE(consumed_samples >= 0, UsageError, "consumed samples must be >= 0");
}

void MicroBatchLoader::next(std::int32_t* tokens) {
    const std::int64_t step = static_cast<std::int64_t>(mbs_) * dp_size_;
    if (consumed_ + step > ds_.size())
        GPT_THROW(DataError, "the dataset has ", ds_.size(), " samples; the next micro-batch needs samples [",
                  consumed_, ", ", consumed_ + step, "). HINT: request more samples (train-iters/global batch) when building it");
    const std::int64_t row = ds_.seq_length() + 1;
    const std::int64_t begin = consumed_ + static_cast<std::int64_t>(dp_rank_) * mbs_;
    for (int b = 0; b < mbs_; ++b) ds_.sample(begin + b, tokens + b * row);
    consumed_ += step;
}

}  // namespace gpt::data
