// build_gpt_datasets: --data-path / --split / --mock-data -> train, valid and test datasets.
#include <algorithm>
#include <cmath>
#include <future>

#include "config/data_blend.hpp"

#include "core/errors.hpp"
#include "core/strings.hpp"
#include "data/gpt_dataset.hpp"
#include "data/gpt_indices.hpp"
#include "data/indexed_dataset.hpp"
#include "log/log.hpp"

namespace gpt::data {

namespace {

const char* const kSplitNames[3] = {"train", "valid", "test"};

// Opens one prefix of the blend; when the prefix is a word of a value that held spaces, the
// error says how that value was read (Megatron's blend syntax) and how to give such a path.
std::shared_ptr<const IndexedDataset> open_prefix(const gpt::DataConfig& cfg, const std::string& prefix,
                                                  const char* flag) {
    std::shared_ptr<const IndexedDataset> d;
    try {
        d = std::make_shared<const IndexedDataset>(prefix);
    } catch (const IoError& e) {
        for (const std::string& text : cfg.blend_texts) {
            const std::vector<std::string> words = split_whitespace(text);
            if (std::find(words.begin(), words.end(), prefix) == words.end()) continue;
            GPT_THROW(IoError, e.what(), " (--", flag, " '", text, "' was read as a blend of ", words.size(),
                      " words, Megatron's syntax \"[weight] prefix ...\"; a prefix that contains spaces is taken "
                      "whole only when '", text, ".idx' exists)");
        }
        throw;
    }
    GPT_REQUIRE(d->num_sequences() > 0, DataError, "dataset '", prefix, "' (--", flag,
                ") is empty: its .idx lists 0 sequences and 0 documents; preprocess text into it or leave it out");
    return d;
}

// Samples of one epoch of `ds`: what its split gives before it repeats.
std::int64_t samples_per_epoch(const GptDataset& ds) { return (ds.tokens_per_epoch() - 1) / ds.seq_length(); }

// Rank 0's report of one dataset split, and Megatron's behaviour where the split is smaller
// than the request (it repeats: epochs) said out loud for validation, test and blend parts.
void report(const GptDataset& ds, const std::string& prefix, int split, std::int64_t asked, const BlendEntry* part) {
    GPT_LOG(info) << "> " << kSplitNames[split] << " split of '" << prefix << "': " << ds.tokens_per_epoch()
                  << " tokens, " << samples_per_epoch(ds) << " samples per epoch, " << asked << " asked: "
                  << ds.num_epochs() << " epoch(s); index cache " << (ds.built_cache() ? "built" : "found") << " ("
                  << ds.cache_path() << ")";
    if (ds.num_epochs() == 1 || (split == 0 && !part)) return;  // several training epochs are ordinary
    if (part)
        GPT_LOG(warning) << "blend part '" << prefix << "' (weight " << part->weight << ") is smaller than its share: its "
                         << kSplitNames[split] << " split gives " << samples_per_epoch(ds) << " samples per epoch and the blend draws "
                         << asked << ", so it repeats over " << ds.num_epochs() << " epochs (as in Megatron)";
    else
        GPT_LOG(warning) << "the " << kSplitNames[split] << " split of '" << prefix << "' gives " << samples_per_epoch(ds)
                         << " samples per epoch but " << (split == 1 ? "validation" : "the test") << " draws " << asked
                         << ", so it repeats over " << ds.num_epochs() << " epochs (as in Megatron)";
}

}  // namespace

GptDatasets build_gpt_datasets(const gpt::DataConfig& cfg, int seq_length, std::uint64_t seed,
                               std::array<std::int64_t, 3> num_samples, MPI_Comm comm, int mock_vocab_size) {
    for (auto n : num_samples) GPT_REQUIRE(n >= 0, UsageError, "negative sample count ", n);
    GptDatasets out;
    std::unique_ptr<SampleDataset>* slots[3] = {&out.train, &out.valid, &out.test};
    if (cfg.use_mock()) {
        // Splits get different seeds so validation does not repeat training samples.
        for (int s = 0; s < 3; ++s)
            if (num_samples[s] > 0)
                *slots[s] = std::make_unique<MockGptDataset>(num_samples[s], seq_length, seed + 1000003ull * s, mock_vocab_size);
        return out;
    }
    const std::array<double, 3> fractions = parse_split(cfg.split);
    const Blend blend = parse_blend(cfg.data_path, "data-path");
    GPT_REQUIRE(!blend.entries.empty(), UsageError, "no --data-path given (or use --mock-data)");
    std::vector<std::shared_ptr<const IndexedDataset>> data;
    for (const auto& e : blend.entries) data.push_back(open_prefix(cfg, e.prefix, "data-path"));

    std::vector<double> weights;
    for (std::size_t d = 0; d < blend.entries.size(); ++d) {
        if (blend.weighted) {
            weights.push_back(blend.entries[d].weight);
        } else {
            // Unweighted prefixes mix in proportion to their sizes (tokens), like a concatenation.
            weights.push_back(static_cast<double>(data[d]->tokens_in(0, data[d]->num_sequences())));
        }
    }
    double sum = 0;
    for (double w : weights) sum += w;
    GPT_REQUIRE(sum > 0, DataError, "the datasets of --data-path hold no tokens");
    for (double& w : weights) w /= sum;

    // The samples each (split, dataset) gives: the whole request for one dataset; for a blend
    // Megatron's share with a 0.5% surplus, so the blend never runs a part dry.
    auto asked = [&](int s, std::size_t d) -> std::int64_t {
        if (data.size() == 1) return num_samples[s];
        const double share = std::ceil(static_cast<double>(num_samples[s]) * weights[d]);
        return static_cast<std::int64_t>(std::ceil(share * 1.005));
    };
    auto spec = [&](int s, std::size_t d) {
        const auto b = split_boundaries(fractions, data[d]->num_sequences());
        return SplitSpec{data[d], kSplitNames[s], b[s], b[s + 1], seq_length, seed, asked(s, d), cfg.data_cache_path};
    };
    // A blend's dataset index needs only the weights and the sample count: computed beside
    // the cache build, which waits on the disk much of its time.
    std::array<std::future<BlendingIndices>, 3> blending;
    if (data.size() > 1)
        for (int s = 0; s < 3; ++s)
            if (num_samples[s] > 0 && fractions[s] > 0)
                blending[s] = std::async(std::launch::async, [&weights, n = num_samples[s]] {
                    return blending_indices(weights, n);
                });
    // Rank 0 builds every missing cache at once before the splits are opened one by one.
    int rank = 0;
    if (comm != MPI_COMM_NULL) MPI_Comm_rank(comm, &rank);
    std::vector<std::string> built;
    if (rank == 0) {
        std::vector<SplitSpec> specs;
        for (int s = 0; s < 3; ++s)
            for (std::size_t d = 0; d < data.size() && num_samples[s] > 0 && fractions[s] > 0; ++d)
                if (asked(s, d) > 0) specs.push_back(spec(s, d));
        built = build_index_caches(specs);
    }

    for (int s = 0; s < 3; ++s) {
        if (num_samples[s] == 0) continue;  // nothing asked of it (e.g. --eval-iters 0): not built
        if (fractions[s] == 0) {
            GPT_LOG(warning) << "--split '" << cfg.split << "' gives the " << kSplitNames[s] << " split nothing, so the "
                             << num_samples[s] << " " << kSplitNames[s] << " samples asked are not drawn"
                             << (s == 0 ? "" : s == 1 ? ": the run has no validation (as in Megatron)" : ": the run has no test evaluation (as in Megatron)");
            continue;
        }
        auto make = [&](std::size_t d, const BlendEntry* part) -> std::unique_ptr<SampleDataset> {
            const SplitSpec sp = spec(s, d);
            if (sp.num_samples == 0) return std::make_unique<EmptyDataset>(seq_length);  // a blend part of weight 0
            auto ds = std::make_unique<GptDataset>(sp.data, sp.split_name, sp.first, sp.last, seq_length, seed,
                                                   sp.num_samples, sp.cache_dir, comm, built);
            report(*ds, blend.entries[d].prefix, s, sp.num_samples, part);
            return ds;
        };
        if (data.size() == 1) {
            *slots[s] = make(0, nullptr);
            continue;
        }
        std::vector<std::unique_ptr<SampleDataset>> parts;
        for (std::size_t d = 0; d < data.size(); ++d) parts.push_back(make(d, &blend.entries[d]));
        *slots[s] = std::make_unique<BlendedDataset>(std::move(parts), blending[s].get());
    }
    return out;
}

}  // namespace gpt::data
