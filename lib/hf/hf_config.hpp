// The JSON files of a Hugging Face GPT-2 folder (config.json, generation_config.json,
// tokenizer_config.json): written from our model's shape, and config.json read back with
// everything GPT-2 can say that this model cannot express refused by name.
#pragma once

#include <cstdint>
#include <string>

namespace gpt::hf {

// GPT-2's shape in HF's names. GPT-2's tokenizer has <|endoftext|> = 50256 as BOS and EOS.
struct Gpt2Config {
    int n_layer = 0, n_embd = 0, n_head = 0, n_inner = 0, n_positions = 0;
    std::int64_t vocab_size = 0;
    double layer_norm_epsilon = 1e-5;
    bool tanh_gelu = true;  // activation_function gelu_new (tanh approximation) or gelu (erf)
    std::int64_t bos_token_id = 50256, eos_token_id = 50256;
};

std::string config_json(const Gpt2Config& c);
std::string generation_config_json(const Gpt2Config& c);
std::string tokenizer_config_json(const Gpt2Config& c);

// Parses config.json (`path` only names it in errors). Throws UsageError for another model
// type or architecture and for GPT-2 options this model cannot express (untied embeddings,
// unscaled attention, layer-index scaling, cross-attention, other activations), DataError
// for malformed JSON or missing and nonsensical sizes.
Gpt2Config parse_config_json(const std::string& text, const std::string& path);

}  // namespace gpt::hf
