#include "hf/llama_config.hpp"

#include <charconv>
#include <sstream>

#include "core/errors.hpp"
#include "hf/config_fields.hpp"

namespace gpt::hf {

namespace {

std::string number(double v) {  // the shortest text that reads back as the same double
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
}

std::string id_or_null(std::int64_t v) { return v < 0 ? "null" : std::to_string(v); }

}  // namespace

std::string llama_config_json(const LlamaConfig& c) {
    std::ostringstream os;
    os << "{\n"
       << "  \"architectures\": [\"LlamaForCausalLM\"],\n"
       << "  \"model_type\": \"llama\",\n"
       << "  \"hidden_act\": \"silu\",\n"
       << "  \"hidden_size\": " << c.hidden_size << ",\n"
       << "  \"intermediate_size\": " << c.intermediate_size << ",\n"
       << "  \"num_hidden_layers\": " << c.num_hidden_layers << ",\n"
       << "  \"num_attention_heads\": " << c.num_attention_heads << ",\n"
       << "  \"num_key_value_heads\": " << c.num_key_value_heads << ",\n"
       << "  \"head_dim\": " << c.hidden_size / c.num_attention_heads << ",\n"
       << "  \"max_position_embeddings\": " << c.max_position_embeddings << ",\n"
       << "  \"vocab_size\": " << c.vocab_size << ",\n"
       << "  \"rms_norm_eps\": " << number(c.rms_norm_eps) << ",\n"
       << "  \"rope_theta\": " << number(c.rope_theta) << ",\n"
       << "  \"rope_scaling\": null,\n"
       << "  \"attention_bias\": false,\n  \"mlp_bias\": false,\n"
       << "  \"attention_dropout\": 0.0,\n"
       << "  \"pretraining_tp\": 1,\n"
       << "  \"tie_word_embeddings\": " << (c.tie_word_embeddings ? "true" : "false") << ",\n"
       << "  \"bos_token_id\": " << id_or_null(c.bos_token_id) << ",\n"
       << "  \"eos_token_id\": " << id_or_null(c.eos_token_id) << ",\n"
       << "  \"torch_dtype\": \"float32\"\n"
       << "}\n";
    return os.str();
}

std::string config_model_type(const std::string& text, const std::string& path) {
    return ConfigFields(text, path).string_of("model_type", "");
}

LlamaConfig parse_llama_config_json(const std::string& text, const std::string& path) {
    const ConfigFields f(text, path);
    const std::string type = f.string_of("model_type", "");
    GPT_REQUIRE(type == "llama", UsageError, path, ": model_type is '", type, "', not 'llama'");
    if (!f.architectures().empty()) {
        bool ok = false;
        for (const auto& a : f.architectures()) ok |= a == "LlamaForCausalLM" || a == "LlamaModel";
        GPT_REQUIRE(ok, UsageError, path, ": architectures is ", f.architectures().front(),
                    ", not LlamaForCausalLM or LlamaModel");
    }
    LlamaConfig c;
    c.num_hidden_layers = static_cast<int>(f.int_of("num_hidden_layers", 0, true));
    c.hidden_size = static_cast<int>(f.int_of("hidden_size", 0, true));
    c.num_attention_heads = static_cast<int>(f.int_of("num_attention_heads", 0, true));
    c.num_key_value_heads = static_cast<int>(f.int_of("num_key_value_heads", c.num_attention_heads, false));
    c.intermediate_size = static_cast<int>(f.int_of("intermediate_size", 0, true));
    c.max_position_embeddings = static_cast<int>(f.int_of("max_position_embeddings", 0, true));
    c.vocab_size = f.int_of("vocab_size", 0, true);
    GPT_REQUIRE(c.hidden_size % c.num_attention_heads == 0, DataError, path, ": hidden_size ", c.hidden_size,
                " is not a multiple of num_attention_heads ", c.num_attention_heads);
    GPT_REQUIRE(c.num_attention_heads % c.num_key_value_heads == 0, DataError, path, ": num_attention_heads ",
                c.num_attention_heads, " is not a multiple of num_key_value_heads ", c.num_key_value_heads);
    c.rms_norm_eps = f.positive_of("rms_norm_eps", 1e-6);  // LlamaConfig's default
    c.rope_theta = f.positive_of("rope_theta", 10000.0);
    c.tie_word_embeddings = f.bool_of("tie_word_embeddings", false);
    if (f.has("bos_token_id")) c.bos_token_id = f.int_of("bos_token_id", -1, false);
    if (f.has("eos_token_id") && f.raw("eos_token_id").front() != '[') c.eos_token_id = f.int_of("eos_token_id", -1, false);
    const std::int64_t hd = f.int_of("head_dim", c.hidden_size / c.num_attention_heads, false);
    GPT_REQUIRE(hd == c.hidden_size / c.num_attention_heads, UsageError, path, ": head_dim ", hd,
                " is not hidden_size / num_attention_heads: cannot be expressed (--kv-channels)");
    const std::string act = f.string_of("hidden_act", "silu");
    GPT_REQUIRE(act == "silu", UsageError, path, ": hidden_act ", act, " cannot be expressed (this model's gated MLP is SwiGLU: silu)");
    GPT_REQUIRE(!f.bool_of("attention_bias", false), UsageError, path,
                ": attention_bias is true: linear biases cannot be expressed with --swiglu here");
    GPT_REQUIRE(!f.bool_of("mlp_bias", false), UsageError, path, ": mlp_bias is true: cannot be expressed");
    GPT_REQUIRE(!f.has("rope_scaling"), UsageError, path, ": rope_scaling ", f.raw("rope_scaling"),
                " cannot be expressed (this model's rope is unscaled)");
    const std::int64_t ptp = f.int_of("pretraining_tp", 1, false);
    GPT_REQUIRE(ptp == 1, UsageError, path, ": pretraining_tp ", ptp, " cannot be expressed");
    return c;
}

}  // namespace gpt::hf
