// The checkpoint a run's --load will try first, opened for its metadata before the ranks
// build anything: resolve_run opens it once and reads the padded vocabulary
// (checkpoint_vocab) and the data positions (data_positions) from it. The load itself verifies the file's contents.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/load.hpp"
#include "config/config.hpp"

namespace gpt::train {

struct FirstCheckpoint {
    std::int64_t iteration = 0;
    std::string file;
    // Null when the file cannot be opened and --load-fallback may pass over it (the load
    // decides which checkpoint it takes); without --load-fallback that error is thrown.
    std::unique_ptr<ckpt::CheckpointReader> reader;
};

// Whether --load's checkpoint comes from the non-persistent folder: with
// --non-persistent-ckpt-type global and no --ckpt-step (which names one of --load's), when
// that folder's checkpoint is at least as new as --load's, as Megatron's
// _load_base_checkpoint. Reads the trackers (not collective); an unreadable one is passed
// over with --load-fallback, and is the load's error without it.
bool non_persistent_first(const CheckpointConfig& ck);
// The folders --load tries, in order: the non-persistent one first when `non_persistent_first`,
// then (for --load-fallback, when its checkpoint is damaged) --load's. Empty without --load.
std::vector<ckpt::LoadRequest> load_requests(const CheckpointConfig& ck, bool non_persistent_first);

// Collective-free, on every rank alike. None: no --load, or a fresh start (no checkpoint
// in the folder). The same errors as the load's for a --ckpt-step or tracker it cannot follow.
std::optional<FirstCheckpoint> open_first_checkpoint(const CheckpointConfig& ck);

// --exit-on-missing-checkpoint (Megatron's): a --load folder that is empty or absent
// (`found` false) is an IoError naming the folder, exit 1 as Megatron's, instead of a fresh
// start. (A folder whose checkpoints are all damaged is a DataError with or without it.)
void require_found_checkpoint(const CheckpointConfig& ck, bool found);

}  // namespace gpt::train
