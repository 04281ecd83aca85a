// config.json of a Hugging Face LlamaForCausalLM folder: written from our Llama-style model's
// shape, and read back with every Llama option this model cannot express refused by name.
#pragma once

#include <cstdint>
#include <string>

namespace gpt::hf {

struct LlamaConfig {
    int num_hidden_layers = 0, hidden_size = 0, num_attention_heads = 0, num_key_value_heads = 0;
    int intermediate_size = 0, max_position_embeddings = 0;
    std::int64_t vocab_size = 0;
    double rms_norm_eps = 1e-5, rope_theta = 10000.0;
    bool tie_word_embeddings = false;
    std::int64_t bos_token_id = -1, eos_token_id = -1;  // -1: none known (written as null)
};

std::string llama_config_json(const LlamaConfig& c);

// Parses config.json (`path` only names it in errors). Throws UsageError for another
// architecture and for what this model cannot express (biases, rope scaling, another
// activation, a head_dim other than hidden_size / heads), DataError for malformed JSON or
// missing and nonsensical sizes.
LlamaConfig parse_llama_config_json(const std::string& text, const std::string& path);

// The model_type of a config.json ("" when absent): which reader applies.
std::string config_model_type(const std::string& text, const std::string& path);

}  // namespace gpt::hf
