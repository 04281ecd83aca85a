#include "hf/hf_config.hpp"

#include <charconv>
#include <map>
#include <sstream>
#include <vector>

#include "core/errors.hpp"
#include "hf/config_fields.hpp"
#include "text/json.hpp"

namespace gpt::hf {

namespace {

// The shortest text that reads back as the same double (layer_norm_epsilon round-trips).
std::string number(double v) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
}

const char* activation(const Gpt2Config& c) { return c.tanh_gelu ? "gelu_new" : "gelu"; }

}  // namespace

std::string config_json(const Gpt2Config& c) {
    std::ostringstream os;
    os << "{\n"
       << "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
       << "  \"model_type\": \"gpt2\",\n"
       << "  \"activation_function\": \"" << activation(c) << "\",\n"
       << "  \"n_embd\": " << c.n_embd << ",\n"
       << "  \"n_layer\": " << c.n_layer << ",\n"
       << "  \"n_head\": " << c.n_head << ",\n"
       << "  \"n_inner\": " << c.n_inner << ",\n"
       << "  \"n_positions\": " << c.n_positions << ",\n"
       << "  \"n_ctx\": " << c.n_positions << ",\n"
       << "  \"vocab_size\": " << c.vocab_size << ",\n"
       << "  \"layer_norm_epsilon\": " << number(c.layer_norm_epsilon) << ",\n"
       // Dropout is a training choice; an exported model is for inference and fine-tuning.
       << "  \"resid_pdrop\": 0.0,\n  \"embd_pdrop\": 0.0,\n  \"attn_pdrop\": 0.0,\n"
       << "  \"scale_attn_weights\": true,\n"
       << "  \"scale_attn_by_inverse_layer_idx\": false,\n"
       << "  \"reorder_and_upcast_attn\": false,\n"
       << "  \"tie_word_embeddings\": true,\n"
       << "  \"bos_token_id\": " << c.bos_token_id << ",\n"
       << "  \"eos_token_id\": " << c.eos_token_id << ",\n"
       << "  \"torch_dtype\": \"float32\"\n"
       << "}\n";
    return os.str();
}

std::string generation_config_json(const Gpt2Config& c) {
    std::ostringstream os;
    os << "{\n  \"bos_token_id\": " << c.bos_token_id << ",\n  \"eos_token_id\": " << c.eos_token_id
       << "\n}\n";
    return os.str();
}

std::string tokenizer_config_json(const Gpt2Config& c) {
    std::ostringstream os;
    os << "{\n  \"tokenizer_class\": \"GPT2Tokenizer\",\n"
       << "  \"model_max_length\": " << c.n_positions << ",\n"
       << "  \"bos_token\": \"<|endoftext|>\",\n  \"eos_token\": \"<|endoftext|>\",\n"
       << "  \"unk_token\": \"<|endoftext|>\",\n  \"add_prefix_space\": false\n}\n";
    return os.str();
}

Gpt2Config parse_config_json(const std::string& text, const std::string& path) {
    const ConfigFields f(text, path);
    auto string_of = [&](const char* k, const std::string& def) { return f.string_of(k, def); };
    auto int_of = [&](const char* k, std::int64_t def, bool required) { return f.int_of(k, def, required); };
    auto bool_of = [&](const char* k, bool def) { return f.bool_of(k, def); };
    const std::vector<std::string>& architectures = f.architectures();
    const std::string type = string_of("model_type", "");
    GPT_REQUIRE(type == "gpt2", UsageError, path, ": model_type is '", type,
                "', not 'gpt2' or 'llama': only Hugging Face GPT-2 and Llama checkpoints convert to this model");
    if (!architectures.empty()) {
        bool ok = false;
        for (const auto& a : architectures) ok |= a == "GPT2LMHeadModel" || a == "GPT2Model";
        GPT_REQUIRE(ok, UsageError, path, ": architectures is ", architectures.front(),
                    ", not GPT2LMHeadModel or GPT2Model");
    }
    Gpt2Config c;
    c.n_layer = static_cast<int>(int_of("n_layer", 0, true));
    c.n_embd = static_cast<int>(int_of("n_embd", 0, true));
    c.n_head = static_cast<int>(int_of("n_head", 0, true));
    c.n_positions = static_cast<int>(int_of("n_positions", 0, true));
    c.vocab_size = int_of("vocab_size", 0, true);
    c.n_inner = static_cast<int>(int_of("n_inner", 4LL * c.n_embd, false));  // null: 4 n_embd
    GPT_REQUIRE(c.n_embd % c.n_head == 0, DataError, path, ": n_embd ", c.n_embd, " is not a multiple of n_head ",
                c.n_head);
    c.bos_token_id = int_of("bos_token_id", 50256, false);
    c.eos_token_id = int_of("eos_token_id", 50256, false);
    c.layer_norm_epsilon = f.positive_of("layer_norm_epsilon", c.layer_norm_epsilon);
    const std::string act = string_of("activation_function", "gelu_new");
    GPT_REQUIRE(act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu", UsageError, path,
                ": activation_function ", act, " cannot be expressed (this model has GELU: gelu_new or gelu)");
    c.tanh_gelu = act != "gelu";
    GPT_REQUIRE(bool_of("tie_word_embeddings", true), UsageError, path,
                ": tie_word_embeddings is false: untied output embeddings cannot be expressed");
    GPT_REQUIRE(bool_of("scale_attn_weights", true), UsageError, path,
                ": scale_attn_weights is false: unscaled attention cannot be expressed");
    GPT_REQUIRE(!bool_of("scale_attn_by_inverse_layer_idx", false), UsageError, path,
                ": scale_attn_by_inverse_layer_idx cannot be expressed");
    GPT_REQUIRE(!bool_of("add_cross_attention", false), UsageError, path,
                ": add_cross_attention cannot be expressed (a decoder-only model)");
    return c;
}

}  // namespace gpt::hf
