#include "data/split_datasets.hpp"

#include <filesystem>

namespace gpt::data {

namespace {

// One split s of the blend `paths`: the whole data, as split s of a --split that gives s everything.
std::unique_ptr<SampleDataset> whole_as_split(const gpt::DataConfig& cfg, const std::vector<std::string>& paths,
                                              int s, int seq_length, std::uint64_t seed,
                                              std::int64_t num_samples, MPI_Comm comm, int vocab) {
    gpt::DataConfig c = cfg;
    c.train_data_path.clear();
    c.valid_data_path.clear();
    c.test_data_path.clear();
    c.data_path = paths;
    c.split = s == 0 ? "100,0,0" : s == 1 ? "0,100,0" : "0,0,100";
    std::array<std::int64_t, 3> n{0, 0, 0};
    n[s] = num_samples;
    GptDatasets ds = build_gpt_datasets(c, seq_length, seed, n, comm, vocab);
    return std::move(s == 0 ? ds.train : s == 1 ? ds.valid : ds.test);
}

}  // namespace

SplitDatasets build_split_datasets(const gpt::DataConfig& cfg, int seq_length, std::uint64_t seed,
                                   std::array<std::int64_t, 3> num_samples, MPI_Comm comm, int vocab) {
    SplitDatasets out;
    if (!cfg.per_split() || cfg.use_mock()) {
        GptDatasets ds = build_gpt_datasets(cfg, seq_length, seed, num_samples, comm, vocab);
        out.train = std::move(ds.train);
        out.test = std::move(ds.test);
        if (ds.valid) out.valid.push_back({"", std::move(ds.valid)});
        return out;
    }
    if (!cfg.train_data_path.empty())
        out.train = whole_as_split(cfg, cfg.train_data_path, 0, seq_length, seed, num_samples[0], comm, vocab);
    // A split asked for no samples (--eval-iters 0) is not built: no set, no cache files.
    auto add_valid = [&](std::string name, std::unique_ptr<SampleDataset> ds) {
        if (ds) out.valid.push_back({std::move(name), std::move(ds)});
    };
    if (cfg.multiple_validation_sets) {
        for (const std::string& prefix : cfg.valid_data_path)
            add_valid(std::filesystem::path(prefix).filename().string(),
                      whole_as_split(cfg, {prefix}, 1, seq_length, seed, num_samples[1], comm, vocab));
    } else if (!cfg.valid_data_path.empty()) {
        add_valid("", whole_as_split(cfg, cfg.valid_data_path, 1, seq_length, seed, num_samples[1], comm, vocab));
    }
    if (!cfg.test_data_path.empty())
        out.test = whole_as_split(cfg, cfg.test_data_path, 2, seq_length, seed, num_samples[2], comm, vocab);
    return out;
}

}  // namespace gpt::data
