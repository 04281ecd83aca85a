// convert_checkpoint's Llama-style half (convert.hpp's export and import dispatch here when
// the checkpoint's options are Llama's or config.json's model_type is llama).
#pragma once

#include <string>

#include "hf/convert.hpp"
#include "hf/one_rank_model.hpp"
#include "hf/staging_dir.hpp"

namespace gpt::hf {

// Writes config.json (LlamaForCausalLM), generation_config.json, model.safetensors (fp32)
// and, for the GPT-2 BPE tokenizer, its files; other tokenizers get none (said in the
// returned line). Publishes `out`.
std::string export_llama(const ExportOptions& o, const LoadedCheckpoint& ck, StagingDir& out);

// Our checkpoint at iteration 0 from a LlamaForCausalLM folder whose config.json is `text`.
std::string import_llama(const ImportOptions& o, const std::string& text, const std::string& config_path);

}  // namespace gpt::hf
