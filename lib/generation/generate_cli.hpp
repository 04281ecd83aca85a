// gpt_generate's flags and run: text from a checkpoint. The model's shape, vocabulary and
// tokenizer come from the checkpoint's saved arguments; the remaining flags are passed to
// the training flag parser (--device, --fp16/--bf16, --tensor-model-parallel-size,
// --use-flash-attn, or a model flag, which must then agree with the checkpoint).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "inference/sampling.hpp"

namespace gpt::generation {

struct GenerateOptions {
    std::string load;                  // --load DIR
    std::int64_t ckpt_step = -1;       // --ckpt-step N; -1: the tracker's
    std::vector<std::string> prompts;  // --prompt (repeatable)
    std::string prompt_file;           // --prompt-file F: one prompt per line
    int max_new_tokens = 64;
    inference::SamplingOptions sampling;
    int batch_size = 8;
    std::string output_format = "text";  // text | jsonl
    bool help = false;
    std::vector<std::string> other;    // training flags (see above)
};

// Throws UsageError for a bad or missing value.
GenerateOptions parse_generate_args(const std::vector<std::string>& args);
std::string generate_usage();

// Collective over comm (all ranks: one TP group). Rank 0 writes the completions to out;
// log lines go to err. Returns the exit code.
int run_generate(const GenerateOptions& o, MPI_Comm comm, std::ostream& out, std::ostream& err);

}  // namespace gpt::generation
