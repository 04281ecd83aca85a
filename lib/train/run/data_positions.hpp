// Where a run's data loaders start (issue #35: resolved once, into RunConfig): a fresh run
// at sample 0; a resumed one where its checkpoint stopped (Megatron's consumed_train_samples
// and consumed_valid_samples), read when the run is resolved, as the padded vocabulary is
// (train/run/checkpoint_vocab.hpp). The Trainer's load checks it restored the same.
#pragma once

#include <cstdint>
#include <optional>

#include "config/config.hpp"

namespace gpt::train {

struct FirstCheckpoint;  // train/run/first_checkpoint.hpp

struct DataPositions {
    std::int64_t consumed_train = 0;  // the training loader's first sample
    std::int64_t consumed_valid = 0;  // every validation set's first sample (the test set starts at 0)
    // The checkpoint they were read from; none: nothing to read (no --load, an empty folder,
    // --finetune, which starts at 0 whatever it loads).
    std::optional<std::int64_t> checkpoint_iteration;
    bool operator==(const DataPositions&) const = default;
};

// Collective-free, on every rank alike: the positions the load will restore, read from the
// checkpoint --load tries first (`first`, as open_first_checkpoint(cfg.checkpoint) gave it)
// as the load decides (--finetune: 0). A first checkpoint that --load-fallback may pass over
// because it cannot be opened gives 0 at its iteration: the load then takes an older one
// (see checked_positions).
DataPositions read_data_positions(const Config& cfg, const std::optional<FirstCheckpoint>& first);

// The Trainer's load: `resolved` (RunConfig's) against what it restored at
// `loaded_iteration` (none: nothing loaded). Returns where the loaders start: `resolved`,
// or, when --load-fallback took an older checkpoint than the one read at resolve time, the
// restored positions. DataError naming both numbers when the same checkpoint (or none)
// gave other positions than resolve read: the folder changed under the run.
DataPositions checked_positions(const DataPositions& resolved, std::optional<std::int64_t> loaded_iteration,
                                std::int64_t restored_train, std::int64_t restored_valid);

}  // namespace gpt::train
