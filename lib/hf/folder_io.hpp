// File I/O of a Hugging Face folder shared by the GPT-2 and the Llama converters.
#pragma once

#include <string>
#include <vector>

#include "hf/safetensors.hpp"
#include "hf/staging_dir.hpp"

namespace gpt::hf {

// The whole file as text (IoError naming it when it cannot be read).
std::string read_text(const std::string& path);

// model.safetensors inside the staging folder (its publish() fsyncs it).
void write_model_file(const StagingDir& out, const std::vector<NamedTensor>& tensors);

}  // namespace gpt::hf
