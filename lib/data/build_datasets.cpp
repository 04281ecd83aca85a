// build_gpt_datasets: --data-path / --split / --mock-data -> train, valid and test datasets.
#include <cmath>

#include "core/errors.hpp"
#include "core/strings.hpp"
#include "data/gpt_dataset.hpp"
#include "data/gpt_indices.hpp"
#include "data/indexed_dataset.hpp"

namespace gpt::data {

namespace {

const char* const kSplitNames[3] = {"train", "valid", "test"};

struct BlendEntry {
    double weight;
    std::string prefix;
};

bool parse_number(const std::string& s, double& out) {
    try {
        std::size_t used = 0;
        out = std::stod(s, &used);
        return used == s.size();
    } catch (const std::exception&) {
        return false;
    }
}

// "pathA" | "w1 pathA w2 pathB ..." | "pathA pathB" (no weights: see below).
std::vector<BlendEntry> parse_blend(const std::vector<std::string>& data_path, bool& weighted) {
    std::vector<std::string> words;
    for (const auto& item : data_path)
        for (auto& w : split_whitespace(item)) words.push_back(w);
    if (words.empty()) GPT_THROW(UsageError, "no --data-path given (or use --mock-data)");
    std::vector<BlendEntry> out;
    double w = 0;
    weighted = words.size() % 2 == 0 && parse_number(words[0], w);
    if (weighted) {
        for (std::size_t i = 0; i < words.size(); i += 2) {
            if (!parse_number(words[i], w) || !(w >= 0))
                GPT_THROW(UsageError, "--data-path: '", words[i], "' should be a non-negative weight before '", words[i + 1], "'");
            out.push_back({w, words[i + 1]});
        }
    } else {
        for (const auto& p : words) {
            if (parse_number(p, w)) GPT_THROW(UsageError, "--data-path: weight '", p, "' without its dataset prefix");
            out.push_back({1.0, p});
        }
    }
    return out;
}

}  // namespace

GptDatasets build_gpt_datasets(const gpt::DataConfig& cfg, int seq_length, std::uint64_t seed,
                               std::array<std::int64_t, 3> num_samples, MPI_Comm comm, int mock_vocab_size) {
    for (auto n : num_samples) GPT_REQUIRE(n >= 0, UsageError, "negative sample count ", n);
    GptDatasets out;
    std::unique_ptr<SampleDataset>* slots[3] = {&out.train, &out.valid, &out.test};
    if (cfg.mock_data && cfg.data_path.empty()) {
        // --mock-data is the fallback when no --data-path is given, so a config file can
        // default to synthetic data and a command line still trains on real text. Splits get different seeds so validation does not repeat training samples.
        for (int s = 0; s < 3; ++s)
            if (num_samples[s] > 0)
                *slots[s] = std::make_unique<MockGptDataset>(num_samples[s], seq_length, seed + 1000003ull * s, mock_vocab_size);
        return out;
    }
    const std::array<double, 3> fractions = parse_split(cfg.split);
    bool weighted = false;
    const std::vector<BlendEntry> blend = parse_blend(cfg.data_path, weighted);
    std::vector<std::shared_ptr<const IndexedDataset>> data;
    for (const auto& e : blend) data.push_back(std::make_shared<const IndexedDataset>(e.prefix));

    std::vector<double> weights;
    for (std::size_t d = 0; d < blend.size(); ++d) {
        if (weighted) {
            weights.push_back(blend[d].weight);
        } else {
            // Unweighted prefixes mix in proportion to their sizes (tokens), like a concatenation.
            double tokens = 0;
            for (std::int64_t i = 0; i < data[d]->num_sequences(); ++i) tokens += data[d]->sequence_length(i);
            weights.push_back(tokens);
        }
    }
    double sum = 0;
    for (double w : weights) sum += w;
    GPT_REQUIRE(sum > 0, UsageError, "--data-path weights must not all be 0");
    for (double& w : weights) w /= sum;

    for (int s = 0; s < 3; ++s) {
        if (fractions[s] == 0) continue;
        auto make = [&](std::size_t d, std::int64_t n) {
            const auto b = split_boundaries(fractions, data[d]->num_sequences());
            return std::make_unique<GptDataset>(data[d], kSplitNames[s], b[s], b[s + 1], seq_length, seed, n,
                                                cfg.data_cache_path, comm);
        };
        if (data.size() == 1) {
            *slots[s] = make(0, num_samples[s]);
            continue;
        }
        // Megatron sizes each part with a 0.5% surplus so the blend never runs a part dry.
        std::vector<std::unique_ptr<SampleDataset>> parts;
        for (std::size_t d = 0; d < data.size(); ++d) {
            const double share = std::ceil(static_cast<double>(num_samples[s]) * weights[d]);
            parts.push_back(make(d, static_cast<std::int64_t>(std::ceil(share * 1.005))));
        }
        *slots[s] = std::make_unique<BlendedDataset>(std::move(parts), weights, num_samples[s]);
    }
    return out;
}

}  // namespace gpt::data
