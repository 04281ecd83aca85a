#include "config/checkpoint_args.hpp"

#include <algorithm>

#include "config/options.hpp"
#include "config/saved_run_check.hpp"
#include "core/errors.hpp"

namespace gpt {

namespace {

std::string flag_of(std::string key) {
    std::replace(key.begin(), key.end(), '_', '-');
    return "--" + key;
}

bool is_location(const std::string& key) {
    return key == "vocab_file" || key == "merge_file" || key == "tokenizer_model";
}

// What --no-use-tokenizer-model-from-checkpoint-args leaves to the user (Megatron's
// tokenizer_model and tokenizer_type, with the GPT-2 files that play tokenizer_model's part).
bool is_tokenizer(const std::string& key) { return key == "tokenizer_type" || is_location(key); }

// Arguments a run may change without changing what the stored tensors mean (Megatron keeps a
// given seq_length; the dropouts it forces from the checkpoint, which would silently undo a
// fine-tuning run's choice): the checkpoint's value only where none is given.
bool is_overridable(const std::string& key) {
    return key == "seq_length" || key == "hidden_dropout" || key == "attention_dropout";
}

}  // namespace

const std::vector<std::string>& carried_arguments() {
    static const std::vector<std::string> keys = [] {
        std::vector<std::string> k = {"num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size",
                                      "seq_length", "max_position_embeddings", "make_vocab_size_divisible_by",
                                      "vocab_size", "layernorm_epsilon", "norm_epsilon", "openai_gelu",
                                      "no_bias_gelu_fusion", "vocab_file", "merge_file", "tokenizer_type",
                                      "tokenizer_model", "hidden_dropout", "attention_dropout"};
        // The arguments the checkpoint check compares (config/saved_run_check.cpp) are carried
        // too, those that are flags (not the derived padded vocabulary and GELU kind).
        for (const std::string& m : meaning_arguments())
            if (find_option_field(m) && std::find(k.begin(), k.end(), m) == k.end()) k.push_back(m);
        return k;
    }();
    return keys;
}

const std::vector<std::string>& carried_parallel_arguments() {
    static const std::vector<std::string> keys = {
        "tensor_model_parallel_size", "pipeline_model_parallel_size", "num_layers_per_virtual_pipeline_stage",
        "num_virtual_stages_per_pipeline_rank", "decoder_first_pipeline_num_layers",
        "decoder_last_pipeline_num_layers", "account_for_embedding_in_pipeline_split",
        "account_for_loss_in_pipeline_split", "pipeline_model_parallel_layout"};
    return keys;
}

std::vector<std::string> take_checkpoint_args(Config& out, const SavedRun& saved, const std::set<std::string>& given,
                                              const CarryRules& rules) {
    GPT_REQUIRE(saved.has("num_layers") && saved.has("hidden_size"), DataError, "checkpoint ", saved.file,
                " has no model arguments in its saved run (saved by an older build?): cannot tell the model's "
                "shape");
    std::vector<std::string> keys = carried_arguments();
    const std::vector<std::string>& layout = carried_parallel_arguments();
    if (rules.parallel) keys.insert(keys.end(), layout.begin(), layout.end());
    std::vector<std::string> taken;
    for (const std::string& k : keys) {
        if (!saved.has(k) || (!rules.tokenizer && is_tokenizer(k))) continue;
        const OptionField& f = *find_option_field(k);
        const OptionValue s = f.get(saved.config);
        if (!given.count(k)) {
            f.set(out, s);
            if (k == "tensor_model_parallel_size") out.parallel.tp_given = true;
            if (k == "pipeline_model_parallel_size") out.parallel.pp_given = true;
            taken.push_back(k + " " + option_value_text(s));
            continue;
        }
        // The user's location of the tokenizer files wins over the saved one; None: not
        // known when it was saved.
        const OptionValue u = f.get(out);
        if (is_location(k) || is_overridable(k) || option_value_unset(s) || saved.same(s, u)) continue;
        GPT_THROW(UsageError, flag_of(k), ": ", option_value_text(s), " in the checkpoint ", saved.file, ", ",
                  option_value_text(u), " given. HINT: ", rules.hint);
    }
    return taken;
}

}  // namespace gpt
