#include "train/run/prepare_cache.hpp"

#include "data/gpt_dataset.hpp"
#include "data/split_datasets.hpp"
#include "log/log.hpp"
#include "train/run/dataset_samples.hpp"

namespace gpt::train {

namespace {

void count(const data::SampleDataset* ds, PreparedCaches& out) {
    if (const auto* g = dynamic_cast<const data::GptDataset*>(ds)) {
        ++out.files;
        out.built += g->built_cache();
    } else if (const auto* b = dynamic_cast<const data::BlendedDataset*>(ds)) {
        for (const auto& part : b->parts()) count(part.get(), out);
    }
}

}  // namespace

PreparedCaches prepare_data_caches(const RunConfig& run) {
    const Config& cfg = run.cfg;
    const auto samples = dataset_samples(cfg);
    GPT_LOG(info) << "> index caches for train, validation, and test datasets (samples: " << samples[0] << ", "
                  << samples[1] << ", " << samples[2] << ")";
    PreparedCaches out;
    if (cfg.data.use_mock()) {
        GPT_LOG(info) << "> data: --mock-data (synthetic tokens): no index cache to build";
        return out;
    }
    const data::SplitDatasets ds = data::build_split_datasets(cfg.data, cfg.model.seq_length, cfg.training.seed,
                                                              samples, MPI_COMM_NULL,
                                                              static_cast<int>(cfg.model.vocab_size));
    count(ds.train.get(), out);
    for (const auto& v : ds.valid) count(v.data.get(), out);
    count(ds.test.get(), out);
    return out;
}

}  // namespace gpt::train
