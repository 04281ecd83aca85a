// The training entry point that app/gpt_pretrain.cpp calls once the configuration is
// validated and the process groups exist.
#pragma once

#include "dist/process_groups.hpp"
#include "train/run/run_config.hpp"

namespace gpt::train {

// Builds the backend, the datasets (lib/data), the model and optimizer, trains, evaluates.
// Returns the process exit code (0); failures are thrown as typed errors.
int pretrain(const RunConfig& run, dist::ProcessGroups& groups);

}  // namespace gpt::train
