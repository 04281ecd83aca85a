#include "config/saved_run_check.hpp"

#include <algorithm>

#include "core/errors.hpp"

namespace gpt {

namespace {

std::string flag(std::string name) {
    std::replace(name.begin(), name.end(), '_', '-');
    return "--" + name;
}

// The compared value of `key` in `c`, resolved as the model resolves it.
OptionValue resolved(const std::string& key, const Config& c) {
    const ModelConfig& m = c.model;
    // Which GELU matters only where the MLP has one (squared_relu is compared by itself):
    // an empty string is unset, not compared.
    if (key == "gelu")
        return m.squared_relu ? std::string() : std::string(m.tanh_gelu() ? "tanh approximation" : "exact erf");
    if (key == "ffn_hidden_size") return std::int64_t{m.ffn()};
    if (key == "max_position_embeddings")
        return std::int64_t{m.max_position_embeddings > 0 ? m.max_position_embeddings : m.seq_length};
    if (key == "padded_vocab_size") return std::int64_t{m.vocab_size > 0 ? c.padded_vocab_size() : 0};
    return find_option_field(key)->get(c);
}

// None in the table: a value nobody set; a padded vocabulary of 0: the vocabulary was to
// come from the tokenizer.
bool unknown(const std::string& key, const OptionValue& v) {
    return option_value_unset(v) || (key == "padded_vocab_size" && std::get<std::int64_t>(v) == 0);
}

bool stored(const SavedRun& saved, const std::string& key) {
    if (key == "gelu") return saved.has("openai_gelu") && saved.has("no_bias_gelu_fusion");
    return saved.has(key);
}

}  // namespace

const std::vector<std::string>& meaning_arguments() {
    static const std::vector<std::string> names = {
        "num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "max_position_embeddings",
        "padded_vocab_size", "tokenizer_type", "gelu",
        // The decoder's architecture flags: they change what the stored tensors mean.
        "num_query_groups", "group_query_attention", "normalization", "position_embedding_type", "rotary_percent",
        "swiglu", "squared_relu", "apply_layernorm_1p", "qk_layernorm", "untie_embeddings_and_output_weights",
        "disable_bias_linear", "rotary_base", "rotary_interleaved",
        // TikTokenizer: the split pattern and the special tokens placed before the ranks change
        // which id a text maps to (the rank file's path may move, so it is not compared).
        "tiktoken_pattern", "tiktoken_num_special_tokens", "tiktoken_special_tokens"};
    return names;
}

void check_checkpoint_args(const SavedRun& saved, const Config& run) {
    std::string diffs;
    int n = 0;
    for (const std::string& k : meaning_arguments()) {
        if (!stored(saved, k)) continue;
        // The saving run's padded vocabulary is stored as such (it depended on its TP size).
        const OptionValue s = k == "padded_vocab_size" ? OptionValue(saved.padded_vocab_size) : resolved(k, saved.config);
        const OptionValue r = resolved(k, run);
        if (unknown(k, s) || unknown(k, r) || saved.same(s, r)) continue;
        diffs += std::string(n++ ? "; " : "") +
                 (k == "gelu" ? std::string("GELU (--openai-gelu / --no-bias-gelu-fusion)") : flag(k)) + ": " +
                 option_value_text(s) + " in the checkpoint, " + option_value_text(r) + " in this run";
    }
    GPT_REQUIRE(n == 0, UsageError, "checkpoint ", saved.file, " does not match this model: ", diffs,
                ". The stored tensors would mean something else (Megatron's check_checkpoint_args). HINT: use "
                "the checkpoint's values; what may change on load is the parallel layout, the precision, the "
                "batch sizes and the learning-rate schedule");
}

}  // namespace gpt
