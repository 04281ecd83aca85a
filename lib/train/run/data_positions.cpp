#include "train/run/data_positions.hpp"

#include <string>

#include "core/errors.hpp"
#include "train/run/first_checkpoint.hpp"

namespace gpt::train {

namespace {

std::string at(std::optional<std::int64_t> iteration) {
    return iteration ? "the checkpoint of iteration " + std::to_string(*iteration) : std::string("no checkpoint");
}

}  // namespace

DataPositions read_data_positions(const Config& cfg, const std::optional<FirstCheckpoint>& first) {
    // --finetune: a new run on the loaded parameters, its loaders at 0 (LoadPolicy::progress).
    if (cfg.checkpoint.finetune || !first) return {};
    DataPositions p;
    p.checkpoint_iteration = first->iteration;
    if (!first->reader) return p;  // --load-fallback will pass over it
    // The names SavedProgress::read reads (the checkpoint format's).
    p.consumed_train = first->reader->attribute_int("consumed_train_samples");
    p.consumed_valid = first->reader->attribute_int("consumed_valid_samples");
    return p;
}

DataPositions checked_positions(const DataPositions& resolved, std::optional<std::int64_t> loaded_iteration,
                                std::int64_t restored_train, std::int64_t restored_valid) {
    DataPositions restored = resolved;
    restored.consumed_train = restored_train;
    restored.consumed_valid = restored_valid;
    // Only --load-fallback loads another checkpoint than the first candidate: one that
    // resolve_run could not see it would take (the first was damaged).
    if (resolved.checkpoint_iteration && loaded_iteration && *loaded_iteration != *resolved.checkpoint_iteration) {
        restored.checkpoint_iteration = loaded_iteration;
        return restored;
    }
    GPT_REQUIRE(restored == resolved, DataError, "the load restored the data positions ", restored_train,
                " (training) and ", restored_valid, " (validation samples) from ", at(loaded_iteration),
                ", but the run was resolved with ", resolved.consumed_train, " and ", resolved.consumed_valid,
                " from ", at(resolved.checkpoint_iteration), ": the --load folder changed while the run started");
    return resolved;
}

}  // namespace gpt::train
