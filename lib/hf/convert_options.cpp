#include "hf/convert_options.hpp"

#include <boost/program_options/options_description.hpp>
#include <cstdint>
#include <sstream>

#include "config/flag_binding.hpp"
#include "config/flag_parser.hpp"
#include "core/errors.hpp"

namespace po = boost::program_options;

namespace gpt::hf {

namespace {

// The flags, bound to `a`; --tokens to its text, parsed once the flags are read.
po::options_description convert_flags(ConvertArgs& a, std::string& tokens) {
    po::options_description g("convert_checkpoint");
    g.add_options()("help,h", po::bool_switch(&a.help), "show this help");
    add_flag(g, "to", &a.to, "hf (our checkpoint -> Hugging Face) or megatron (Hugging Face -> our checkpoint)");
    add_flag(g, "load", &a.load, "our checkpoint folder to read (--to hf, --dump-logits)");
    add_flag(g, "ckpt-step", &a.ckpt_step, "the iteration to read instead of the latest (-1: the latest)");
    add_flag(g, "output", &a.output, "--to hf: the Hugging Face folder to create");
    add_flag(g, "vocab-file", &a.vocab_file, "--to hf: GPT-2 vocab file to copy (default: the checkpoint's)");
    add_flag(g, "merge-file", &a.merge_file, "--to hf: GPT-2 merges file to copy (default: the checkpoint's)");
    add_flag(g, "load-hf", &a.load_hf, "--to megatron: the Hugging Face GPT-2 or Llama folder to read");
    add_flag(g, "save", &a.save, "--to megatron: our checkpoint folder to create (iteration 0)");
    add_flag(g, "dump-logits", &a.dump_logits, "write fp32 logits (tokens x vocabulary) of our forward to this file");
    add_flag(g, "tokens", &tokens, "--dump-logits: comma-separated token ids");
    add_flag(g, "kv-cache", &a.kv_cache,
             "--dump-logits: from the generation path's KV cache (a prompt pass over the first half, then one "
             "cached step per token)");
    return g;
}

std::vector<std::int32_t> parse_tokens(const std::string& text) {
    std::vector<std::int32_t> out;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        std::size_t used = 0;
        long long v = -1;
        try {
            v = std::stoll(item, &used);
        } catch (const std::logic_error&) {
        }
        GPT_REQUIRE(used == item.size() && v >= 0 && v <= INT32_MAX, UsageError, "--tokens: '", item,
                    "' is not a token id");
        out.push_back(static_cast<std::int32_t>(v));
    }
    return out;
}

}  // namespace

std::string convert_usage() {
    ConvertArgs defaults;
    std::string tokens;
    const po::options_description g = convert_flags(defaults, tokens);
    return flags_usage(
        "usage: convert_checkpoint --to hf --load DIR [--ckpt-step N] --output HF_DIR\n"
        "       convert_checkpoint --to megatron --load-hf HF_DIR --save DIR\n"
        "       convert_checkpoint --dump-logits FILE --load DIR --tokens 1,2,3 [--kv-cache]\n"
        "Our checkpoints to and from Hugging Face GPT-2 or Llama (config.json + model.safetensors).\n",
        {&g});
}

ConvertArgs parse_convert_args(const std::vector<std::string>& args) {
    ConvertArgs a;
    std::string tokens;
    const po::options_description flags = convert_flags(a, tokens);
    parse_flags(flags, args);
    a.tokens = parse_tokens(tokens);
    return a;
}

}  // namespace gpt::hf
