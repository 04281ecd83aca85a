#include "generation/checkpoint_args.hpp"

#include <algorithm>
#include <set>

#include "config/options.hpp"
#include "config/saved_run_check.hpp"
#include "core/errors.hpp"

namespace gpt::generation {

namespace {

std::string key_of(std::string flag) {
    flag = flag.substr(flag.find_first_not_of('-'));
    if (auto eq = flag.find('='); eq != std::string::npos) flag.resize(eq);
    std::replace(flag.begin(), flag.end(), '-', '_');
    return flag;
}

std::string flag_of(std::string key) {
    std::replace(key.begin(), key.end(), '_', '-');
    return "--" + key;
}

bool is_location(const std::string& key) { return key == "vocab_file" || key == "merge_file"; }

}  // namespace

const std::vector<std::string>& carried_arguments() {
    static const std::vector<std::string> keys = [] {
        std::vector<std::string> k = {"num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size",
                                      "seq_length", "max_position_embeddings", "make_vocab_size_divisible_by",
                                      "vocab_size", "layernorm_epsilon", "norm_epsilon", "openai_gelu",
                                      "no_bias_gelu_fusion", "vocab_file", "merge_file", "tokenizer_type"};
        // The arguments the checkpoint check compares (config/saved_run_check.cpp) are carried
        // too, those that are flags (not the derived padded vocabulary and GELU kind).
        for (const std::string& m : meaning_arguments())
            if (find_option_field(m) && std::find(k.begin(), k.end(), m) == k.end()) k.push_back(m);
        return k;
    }();
    return keys;
}

Config config_from_checkpoint(const SavedRun& saved, const std::vector<std::string>& flags) {
    GPT_REQUIRE(saved.has("num_layers") && saved.has("hidden_size"), DataError, "checkpoint ", saved.file,
                " has no model arguments in its saved run (saved by an older build?): cannot tell the model's "
                "shape");
    Config out = parse_args(flags).config;
    std::set<std::string> given;
    for (const std::string& f : flags)
        if (f.rfind("--", 0) == 0) given.insert(key_of(f));
    for (const std::string& k : carried_arguments()) {
        if (!saved.has(k)) continue;
        const OptionField& f = *find_option_field(k);
        const OptionValue s = f.get(saved.config);
        if (!given.count(k)) {
            f.set(out, s);
            continue;
        }
        // The user's location of the tokenizer files wins over the saved one; None: not
        // known when it was saved.
        const OptionValue u = f.get(out);
        if (is_location(k) || option_value_unset(s) || saved.same(s, u)) continue;
        GPT_THROW(UsageError, flag_of(k), ": ", option_value_text(s), " in the checkpoint ", saved.file, ", ",
                  option_value_text(u), " given. HINT: leave it out; gpt_generate takes the model's arguments from "
                  "the checkpoint");
    }
    return out;
}

}  // namespace gpt::generation
