#include "generation/checkpoint_args.hpp"

#include <algorithm>
#include <set>

#include "ckpt/args_check.hpp"
#include "config/options.hpp"
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
                                      "vocab_size", "layernorm_epsilon", "openai_gelu", "no_bias_gelu_fusion",
                                      "vocab_file", "merge_file", "tokenizer_type"};
        // Architecture arguments the checkpoint check compares (lib/ckpt/args_check.cpp) are
        // carried too once this build has the flag.
        const auto names = option_names();
        for (const std::string& m : ckpt::meaning_arguments()) {
            std::string f = m;
            std::replace(f.begin(), f.end(), '_', '-');
            if (std::find(names.begin(), names.end(), f) != names.end() &&
                std::find(k.begin(), k.end(), m) == k.end())
                k.push_back(m);
        }
        return k;
    }();
    return keys;
}

Config config_from_checkpoint(const std::map<std::string, std::string>& saved,
                              const std::vector<std::string>& flags, const std::string& file) {
    const auto& carried = carried_arguments();
    std::vector<std::string> args;
    for (const std::string& k : carried) {
        auto it = saved.find(k);
        if (it == saved.end() || it->second == "None" || it->second == "False") continue;
        // The user's location of the tokenizer files wins over the saved one.
        if (is_location(k) && std::any_of(flags.begin(), flags.end(),
                                          [&](const std::string& f) { return f.rfind("--", 0) == 0 && key_of(f) == k; }))
            continue;
        args.push_back(flag_of(k));
        if (it->second != "True") args.push_back(it->second);
    }
    GPT_REQUIRE(saved.count("num_layers") && saved.count("hidden_size"), DataError, "checkpoint ", file,
                " has no model arguments in its 'config' attribute (saved by an older build?): cannot "
                "tell the model's shape");
    // The user's flags alone, resolved and printed the way the checkpoint's were, so values
    // compare as text whatever their spelling (1e-5 vs 0.00001, a switch vs True).
    const std::string user_table = format_arguments(parse_args(flags).config);
    const auto user = ckpt::parse_arguments_table(user_table);
    std::set<std::string> given;
    for (const std::string& f : flags)
        if (f.rfind("--", 0) == 0) given.insert(key_of(f));
    for (const std::string& k : carried) {
        if (!given.count(k) || is_location(k)) continue;
        auto s = saved.find(k), u = user.find(k);
        if (s == saved.end() || u == user.end() || s->second == "None" || s->second == u->second) continue;
        GPT_THROW(UsageError, flag_of(k), ": ", s->second, " in the checkpoint ", file, ", ", u->second,
                  " given. HINT: leave it out; gpt_generate takes the model's arguments from the checkpoint");
    }
    for (const std::string& f : flags) args.push_back(f);
    return parse_args(args).config;
}

}  // namespace gpt::generation
