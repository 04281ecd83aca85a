// A resumed run takes the padded vocabulary of the checkpoint it loads (issue #19): the
// padding rows take part in the softmax, so they are part of the model, and a run that
// changes the tensor-parallel size must keep them rather than re-pad.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/config.hpp"

namespace gpt::train {

struct FirstCheckpoint;  // train/run/first_checkpoint.hpp

// The decision, apart from the file system (tested on its own): the
// --make-vocab-size-divisible-by that pads cfg's vocabulary to `saved` rows at cfg's TP,
// or 0 when Megatron's padding already gives `saved` or the vocabulary does not fit in it
// (the load then names the mismatch). UsageError naming both numbers when `saved` is not
// divisible by the TP size. `file` names the checkpoint in the message.
int divisible_by_for_saved_vocab(const Config& cfg, std::int64_t saved, const std::string& file);

// Collective-free, on every rank alike: when --load names a checkpoint (`first`, as
// open_first_checkpoint(cfg.checkpoint) gave it), reads its embedding rows and adopts them
// (sets cfg.model.make_vocab_size_divisible_by, so that the arguments table, the planner and
// the model all pad to them). Returns the log line; "" when nothing changed. Fresh runs keep
// Megatron's padding.
std::string adopt_checkpoint_vocab(Config& cfg, const std::optional<FirstCheckpoint>& first);

}  // namespace gpt::train
