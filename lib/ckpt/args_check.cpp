#include "ckpt/args_check.hpp"

#include <algorithm>
#include <map>
#include <sstream>

#include "ckpt/checkpoint_reader.hpp"
#include "core/errors.hpp"

namespace gpt::ckpt {

namespace {

// "  key ........ value" lines between the table's header and footer.
std::map<std::string, std::string> parse_table(const std::string& text) {
    std::map<std::string, std::string> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        const std::size_t k0 = line.find_first_not_of(' ');
        if (k0 == std::string::npos || line.compare(k0, 2, "--") == 0) continue;
        const std::size_t k1 = line.find(' ', k0);
        if (k1 == std::string::npos) continue;
        const std::size_t dots = line.find_first_not_of(' ', k1);
        if (dots == std::string::npos || line[dots] != '.') continue;
        const std::size_t v0 = line.find_first_not_of('.', dots);
        if (v0 == std::string::npos || line[v0] != ' ') continue;
        out[line.substr(k0, k1 - k0)] = line.substr(v0 + 1);
    }
    return out;
}

bool is_false(const std::string& v) { return v == "False" || v == "false" || v == "0"; }

// Defaults that mean "derived from another argument", resolved as the model resolves them.
void resolve(std::map<std::string, std::string>& a) {
    auto get = [&](const char* k) -> std::string {
        auto it = a.find(k);
        return it == a.end() ? std::string() : it->second;
    };
    if (get("ffn_hidden_size") == "0" && !get("hidden_size").empty()) {
        try {
            a["ffn_hidden_size"] = std::to_string(4 * std::stoll(get("hidden_size")));
        } catch (const std::exception&) {
        }
    }
    if (get("max_position_embeddings") == "0" && !get("seq_length").empty())
        a["max_position_embeddings"] = get("seq_length");
    if (a.count("openai_gelu") && a.count("no_bias_gelu_fusion")) {
        const bool tanh = !is_false(get("openai_gelu")) || is_false(get("no_bias_gelu_fusion"));
        a["gelu"] = tanh ? "tanh approximation" : "exact erf";
    }
}

std::string flag(std::string name) {
    std::replace(name.begin(), name.end(), '_', '-');
    return "--" + name;
}

}  // namespace

std::map<std::string, std::string> parse_arguments_table(const std::string& table) { return parse_table(table); }

const std::vector<std::string>& meaning_arguments() {
    static const std::vector<std::string> names = {
        "num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "max_position_embeddings",
        "padded_vocab_size", "tokenizer_type", "gelu",
        // Architecture flags of Megatron that change what the stored tensors mean; compared
        // as soon as both tables have them.
        "kv_channels", "num_query_groups", "group_query_attention", "normalization", "position_embedding_type",
        "use_rotary_position_embeddings", "rotary_percent", "swiglu", "squared_relu", "add_bias_linear",
        "untie_embeddings_and_output_weights", "apply_residual_connection_post_layernorm", "qk_layernorm",
        "apply_layernorm_1p", "disable_bias_linear", "rotary_base", "rotary_interleaved",
        // TikTokenizer: the split pattern and the special tokens placed before the ranks change
        // which id a text maps to (the rank file's path may move, so it is not compared).
        "tiktoken_pattern", "tiktoken_num_special_tokens", "tiktoken_special_tokens"};
    return names;
}

void check_checkpoint_args(const std::string& saved_table, const std::string& run_table, const std::string& file) {
    auto saved = parse_table(saved_table), run = parse_table(run_table);
    resolve(saved);
    resolve(run);
    std::string diffs;
    int n = 0;
    for (const std::string& k : meaning_arguments()) {
        auto s = saved.find(k), r = run.find(k);
        if (s == saved.end() || r == run.end() || s->second == r->second) continue;
        // "None" on one side: not known then (e.g. a vocabulary taken from the tokenizer).
        if (s->second == "None" || r->second == "None") continue;
        diffs += std::string(n++ ? "; " : "") +
                 (k == "gelu" ? std::string("GELU (--openai-gelu / --no-bias-gelu-fusion)") : flag(k)) + ": " +
                 s->second + " in the checkpoint, " + r->second + " in this run";
    }
    GPT_REQUIRE(n == 0, UsageError, "checkpoint ", file, " does not match this model: ", diffs,
                ". The stored tensors would mean something else (Megatron's check_checkpoint_args). HINT: use "
                "the checkpoint's values; what may change on load is the parallel layout, the precision, the "
                "batch sizes and the learning-rate schedule");
}

void check_checkpoint_args(const CheckpointReader& reader, const std::string& run_table) {
    if (!reader.has_attribute("config")) return;
    check_checkpoint_args(reader.attribute_string("config"), run_table, reader.file());
}

}  // namespace gpt::ckpt
