// gpt_generate's run: text from a checkpoint. The model's shape, vocabulary and tokenizer
// come from the checkpoint's saved arguments; its flags are generation/generate_options.hpp.
#pragma once

#include <mpi.h>

#include <ostream>

#include "generation/generate_options.hpp"

namespace gpt::generation {

// Collective over comm (all ranks: one TP group). Rank 0 writes the completions to out;
// log lines go to err. Returns the exit code.
int run_generate(const GenerateOptions& o, MPI_Comm comm, std::ostream& out, std::ostream& err);

}  // namespace gpt::generation
