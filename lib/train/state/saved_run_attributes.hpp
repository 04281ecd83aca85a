// A checkpoint's record of the run that saved it, in and out of the file's root attributes:
// the typed run_config and the human-readable arguments table (config/saved_run.hpp). The
// trainer, gpt_generate and the converter all read it here.
#pragma once

#include <optional>

#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/checkpoint_writer.hpp"
#include "config/saved_run.hpp"

namespace gpt::train {

// run_config and, for people and h5dump, the arguments table (nothing reads it back but the
// legacy reader, for checkpoints without run_config).
void write_saved_run(ckpt::CheckpointWriter& w, const Config& cfg);

// run_config when the file has it, else its arguments table through the legacy reader;
// nullopt when it has neither.
std::optional<SavedRun> read_saved_run(const ckpt::CheckpointReader& r);

}  // namespace gpt::train
