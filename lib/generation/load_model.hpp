// A checkpoint's model, for inference on this rank: the Config from its saved arguments
// (generate/checkpoint_args.hpp) and this TP rank's slice of the fp32 main parameters,
// whatever layout (TP, PP, DP, distributed optimizer) saved it (train/state/load_model_state.hpp,
// the loader the trainer and the converter use too).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/model_spec.hpp"

namespace gpt::generation {

struct LoadedModel {
    Config cfg;                 // the checkpoint's model arguments + the user's flags
    model::ModelDims dims;      // vocab_padded: the stored embedding's rows
    std::vector<float> params;  // ParamLayout(dims, whole model) of this TP rank
    std::int64_t iteration = 0;
    std::string file;
};

// Collective over comm (the ranks of one TP group). UsageError for a --load that names no
// checkpoint or a flag contradicting the saved arguments; IoError / DataError for an
// unreadable or damaged file.
LoadedModel load_model(MPI_Comm comm, const std::string& dir, std::int64_t step,
                       const std::vector<std::string>& flags, int tp_rank, int tp_size);

}  // namespace gpt::generation
