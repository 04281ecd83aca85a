#include "text/preprocess_options.hpp"

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/value_semantic.hpp>

#include "config/flag_binding.hpp"
#include "text/tool_flags.hpp"

namespace po = boost::program_options;

namespace gpt::data {

namespace {

// The flags, bound to `a`, whose values now are the defaults --help prints.
po::options_description preprocess_flags(PreprocessArgs& a) {
    po::options_description g("preprocess_data: loose JSON (one object per line) -> Megatron .bin/.idx");
    g.add_options()("help,h", po::bool_switch(&a.help), "show this help");
    // The two lists with their own help text (add_flag's list would print no default for
    // --json-keys): declared as before, so --help prints them unchanged.
    g.add_options()("input", po::value(&a.opt.inputs)->multitoken(), "input JSON-lines file(s) or glob pattern(s)");
    g.add_options()("json-keys", po::value(&a.opt.json_keys)->multitoken()->default_value({"text"}, "text"),
                    "keys to extract");
    add_flag(g, "output-prefix", &a.opt.output_prefix, "writes <prefix>_<key>_document.bin/.idx");
    add_flag(g, "tokenizer-type", &a.tokenizer_type, "GPT2BPETokenizer or TikTokenizer");
    add_flag(g, "vocab-file", &a.vocab_file, "GPT-2 vocab (encoder.json), e.g. data/gpt2/gpt2-vocab.json");
    add_flag(g, "merge-file", &a.merge_file, "GPT-2 merges (vocab.bpe), e.g. data/gpt2/gpt2-merges.txt");
    add_flag(g, "tokenizer-model", &a.tik.path, "TikTokenizer: rank file (.tiktoken, or Megatron's JSON list)");
    add_flag(g, "tiktoken-pattern", &a.tik.pattern,
             "TikTokenizer: v1, v2 (Megatron's), cl100k_base (= Llama 3's), o200k_base");
    add_flag(g, "tiktoken-num-special-tokens", &a.tik.num_special_tokens, "TikTokenizer: special ids before the ranks");
    add_flag(g, "tiktoken-special-tokens", &a.tik.special_tokens,
             "TikTokenizer: special tokens (must include <unk> <s> </s>)");
    add_flag(g, "vocab-size", &a.tik.vocab_size,
             "TikTokenizer: whole vocab; the ranks are cut to it (0: all ranks + special)");
    add_flag(g, "append-eod", &a.opt.append_eod, "append <|endoftext|> to each non-empty document");
    add_flag(g, "workers", &a.opt.workers, "encoder threads");
    add_flag(g, "chunk-size", &a.opt.chunk_size, "lines per task handed to a worker");
    add_flag(g, "log-interval", &a.opt.log_interval, "progress line every N documents (0: none)");
    add_flag(g, "skip-bad-lines", &a.opt.skip_bad_lines, "count and skip malformed lines instead of failing");
    add_flag(g, "make-vocab-size-divisible-by", &a.make_vocab_size_divisible_by, "for the padded-vocab report");
    add_flag(g, "tensor-model-parallel-size", &a.tensor_model_parallel_size, "for the padded-vocab report");
    add_flag(g, "dataset-impl", &a.dataset_impl, "accepted for old command lines: only mmap exists");
    add_flag(g, "partitions", &a.partitions, "only 1 (use --workers for parallelism)");
    add_flag(g, "split-sentences", &a.split_sentences, "not supported");
    add_flag(g, "keep-newlines", &a.keep_newlines, "not supported");
    return g;
}

}  // namespace

std::string preprocess_usage() {
    PreprocessArgs defaults;
    return tool_usage(preprocess_flags(defaults));
}

PreprocessArgs parse_preprocess_args(const std::vector<std::string>& args) {
    PreprocessArgs a;
    const ParsedFlags parsed = parse_tool_flags(preprocess_flags(a), args, {"input", "output-prefix"});
    if (a.help || args.empty()) return a;
    a.dataset_impl_given = !parsed.values["dataset-impl"].defaulted();
    validate_preprocess_args(a);
    return a;
}

}  // namespace gpt::data
