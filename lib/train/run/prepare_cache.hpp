// Megatron's tools/prepare_cache.py: every dataset index cache a run will read, built (or
// found and checked) by one process ahead of the job, e.g. on a login node before sbatch, so
// the job's ranks only map them. It reads the same flags as gpt_pretrain and builds exactly
// what gpt_pretrain would (the same split sample counts: train/run/dataset_samples.hpp).
#pragma once

#include <cstdint>

#include "train/run/run_config.hpp"

namespace gpt::train {

struct PreparedCaches {
    std::int64_t files = 0;  // index cache files the run reads
    std::int64_t built = 0;  // of them, built by this call (the rest were there)
};

// Builds the datasets of `run` in this process alone (no MPI communicator), logging one line
// per dataset split. Throws what building the datasets throws (DataError, IoError, UsageError).
PreparedCaches prepare_data_caches(const RunConfig& run);

}  // namespace gpt::train
