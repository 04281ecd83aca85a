// convert_checkpoint's operations: our checkpoint (any saved layout: TP/PP/DP, distributed
// optimizer, any precision) to a Hugging Face GPT-2 or Llama folder, such a folder to
// our checkpoint at iteration 0, and the logits of our model's forward on given tokens (the
// reference check of tests/hf). Each runs in one process: the checkpoint is read by the shared
// resharding loader (train/state/load_model_state.hpp) into one fp32 rank's parameters; an
// import is written by the shared saver (train/state/save_model_state.hpp) with the optimizer
// state a fresh run has. No trainer is built.
// Needs MPI initialised (a one-rank world is enough).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpt::hf {

struct ExportOptions {
    std::string load;            // our checkpoint folder (--load)
    std::int64_t ckpt_step = -1; // --ckpt-step; -1: the latest
    std::string output;          // the Hugging Face folder to create
    // The tokenizer files; empty: the ones the checkpoint was trained with (its
    // --vocab-file / --merge-file, relative to the current folder as the run gave them).
    std::string vocab_file, merge_file;
};

// Writes config.json, generation_config.json, model.safetensors (fp32: the fp32 main
// parameters, whatever the training precision), and with the GPT-2 BPE tokenizer vocab.json,
// merges.txt and tokenizer_config.json; a Llama-style checkpoint goes to export_llama
// (llama_convert.hpp). Refuses (UsageError) models neither HF GPT-2 nor Llama can express.
// Returns a line describing what was written.
std::string export_to_hf(const ExportOptions& o);

struct ImportOptions {
    std::string load_hf;  // the Hugging Face folder (config.json, model.safetensors)
    std::string save;     // our checkpoint folder to create
};

// Writes our checkpoint at iteration 0: the parameters, Adam state as a fresh run has it
// (zero moments, no steps), and the arguments check_checkpoint_args compares. Returns a line
// describing it, with the flags to continue training from it.
std::string import_from_hf(const ImportOptions& o);

// Our model's forward on `tokens` (at most the checkpoint's seq-length) from our checkpoint:
// writes (tokens.size(), vocab) fp32 little-endian logits to `output`, the padding columns
// of the vocabulary dropped. kv_cache: from the generation path's KV-cached forward (a
// prompt pass over the first half, then one cached step per token) instead of the training
// forward.
void dump_logits(const std::string& load, std::int64_t ckpt_step, const std::vector<std::int32_t>& tokens,
                 const std::string& output, bool kv_cache = false);

}  // namespace gpt::hf
