// preprocess_data: Megatron's tools/preprocess_data.py flags; see lib/text/preprocess.hpp.
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "core/errors.hpp"
#include "core/timer.hpp"
#include "text/gpt2_tokenizer.hpp"
#include "text/tiktoken_tokenizer.hpp"
#include "text/preprocess.hpp"
#include "data/temp_files.hpp"

#include "tool_main.hpp"

namespace po = boost::program_options;
using namespace gpt;

namespace {

struct Args {
    data::PreprocessOptions opt;
    data::TikTokenizerOptions tik;
    std::string vocab_file, merge_file, tokenizer_type, dataset_impl;
    int make_vocab_size_divisible_by = 128;
    int tensor_model_parallel_size = 1;
    int partitions = 1;
    bool split_sentences = false, keep_newlines = false;
};

Args parse(int argc, char** argv) {
    Args a;
    po::options_description desc("preprocess_data: loose JSON (one object per line) -> Megatron .bin/.idx");
    desc.add_options()
        ("help,h", "show this help")
        ("input", po::value(&a.opt.inputs)->multitoken()->required(), "input JSON-lines file(s) or glob pattern(s)")
        ("json-keys", po::value(&a.opt.json_keys)->multitoken()->default_value({"text"}, "text"), "keys to extract")
        ("output-prefix", po::value(&a.opt.output_prefix)->required(), "writes <prefix>_<key>_document.bin/.idx")
        ("tokenizer-type", po::value(&a.tokenizer_type)->default_value("GPT2BPETokenizer"), "GPT2BPETokenizer or TikTokenizer")
        ("vocab-file", po::value(&a.vocab_file), "GPT-2 vocab (encoder.json), e.g. data/gpt2/gpt2-vocab.json")
        ("merge-file", po::value(&a.merge_file), "GPT-2 merges (vocab.bpe), e.g. data/gpt2/gpt2-merges.txt")
        ("tokenizer-model", po::value(&a.tik.path), "TikTokenizer: rank file (.tiktoken, or Megatron's JSON list)")
        ("tiktoken-pattern", po::value(&a.tik.pattern), "TikTokenizer: v1, v2 (Megatron's), cl100k_base (= Llama 3's), o200k_base")
        ("tiktoken-num-special-tokens", po::value(&a.tik.num_special_tokens)->default_value(1000), "TikTokenizer: special ids before the ranks")
        ("tiktoken-special-tokens", po::value(&a.tik.special_tokens)->multitoken(), "TikTokenizer: special tokens (must include <unk> <s> </s>)")
        ("vocab-size", po::value(&a.tik.vocab_size)->default_value(0), "TikTokenizer: whole vocab; the ranks are cut to it (0: all ranks + special)")
        ("append-eod", po::bool_switch(&a.opt.append_eod), "append <|endoftext|> to each non-empty document")
        ("workers", po::value(&a.opt.workers)->default_value(1), "encoder threads")
        ("chunk-size", po::value(&a.opt.chunk_size)->default_value(64), "lines per task handed to a worker")
        ("log-interval", po::value(&a.opt.log_interval)->default_value(1000), "progress line every N documents (0: none)")
        ("skip-bad-lines", po::bool_switch(&a.opt.skip_bad_lines), "count and skip malformed lines instead of failing")
        ("make-vocab-size-divisible-by", po::value(&a.make_vocab_size_divisible_by)->default_value(128), "for the padded-vocab report")
        ("tensor-model-parallel-size", po::value(&a.tensor_model_parallel_size)->default_value(1), "for the padded-vocab report")
        ("dataset-impl", po::value(&a.dataset_impl), "accepted for old command lines: only mmap exists")
        ("partitions", po::value(&a.partitions)->default_value(1), "only 1 (use --workers for parallelism)")
        ("split-sentences", po::bool_switch(&a.split_sentences), "not supported")
        ("keep-newlines", po::bool_switch(&a.keep_newlines), "not supported");
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help") || argc == 1) {
        std::cout << desc << "\n";
        std::exit(vm.count("help") ? 0 : 2);
    }
    po::notify(vm);
    if (a.tokenizer_type != "GPT2BPETokenizer" && a.tokenizer_type != "TikTokenizer")
        GPT_THROW(UsageError, "--tokenizer-type ", a.tokenizer_type, " is not supported (GPT2BPETokenizer or TikTokenizer)");
    if (a.tokenizer_type == "GPT2BPETokenizer" && (a.vocab_file.empty() || a.merge_file.empty()))
        GPT_THROW(UsageError, "--tokenizer-type GPT2BPETokenizer needs --vocab-file and --merge-file");
    if (a.tokenizer_type == "TikTokenizer") {
        data::TikTokenizer::parse_pattern(a.tik.pattern);  // before any output: a usage error
        if (a.tik.path.empty()) GPT_THROW(UsageError, "--tokenizer-type TikTokenizer needs --tokenizer-model (a tiktoken rank file)");
    }
    if (vm.count("dataset-impl") && a.dataset_impl != "mmap")
        GPT_THROW(UsageError, "--dataset-impl ", a.dataset_impl, " is not supported (only mmap)");
    if (a.split_sentences || a.keep_newlines)
        GPT_THROW(UsageError, "--split-sentences / --keep-newlines (NLTK sentence splitting) are not supported");
    if (a.partitions != 1) GPT_THROW(UsageError, "--partitions ", a.partitions, " is not supported; use --workers");
    if (a.make_vocab_size_divisible_by < 1 || a.tensor_model_parallel_size < 1)
        GPT_THROW(UsageError, "--make-vocab-size-divisible-by and --tensor-model-parallel-size must be >= 1");
    return a;
}

int run(int argc, char** argv) {
    Args a = parse(argc, argv);
    data::remove_temp_files_on_signals();  // Slurm's SIGTERM must not leave *.tmp.PID behind
    Stopwatch startup;
    if (!a.dataset_impl.empty())
        std::cout << "note: --dataset-impl mmap is the only format; the flag is accepted and ignored" << std::endl;
    std::cout << "> building " << a.tokenizer_type << " tokenizer ..." << std::endl;
    std::unique_ptr<data::TextTokenizer> owned;
    if (a.tokenizer_type == "TikTokenizer")
        owned = std::make_unique<data::TikTokenizer>(data::TikTokenizer::load(a.tik));
    else
        owned = std::make_unique<data::Gpt2Tokenizer>(data::Gpt2Tokenizer::load(a.vocab_file, a.merge_file));
    const data::TextTokenizer& tok = *owned;
    const int multiple = a.make_vocab_size_divisible_by * a.tensor_model_parallel_size;
    const int padded = (tok.vocab_size() + multiple - 1) / multiple * multiple;
    std::cout << " > padded vocab (size: " << tok.vocab_size() << ") with " << padded - tok.vocab_size()
              << " dummy tokens (new size: " << padded << ")" << std::endl;
    std::cout << "Vocab size: " << tok.vocab_size() << std::endl;

    data::PreprocessLog log;
    log.info = [&](const std::string& line) { std::cout << line << std::endl; };
    log.progress = [&](const std::string& line) { std::cerr << line << std::endl; };
    log.started = [&] { std::cout << "Time to startup: " << startup.seconds() << std::endl; };
    const data::PreprocessResult r = data::preprocess_corpus(a.opt, tok, log);
    const double t = std::max(r.seconds, 1e-9);
    std::printf("Done: %lld documents, %lld tokens, %.2f MB in %.2f s (%.2f MB/s, %.0f tokens/s) with %d worker%s.\n",
                static_cast<long long>(r.documents), static_cast<long long>(r.tokens), r.bytes / 1048576.0, r.seconds,
                r.bytes / 1048576.0 / t, r.tokens / t, a.opt.workers, a.opt.workers == 1 ? "" : "s");
    if (r.blank_lines) std::printf("Ignored %lld blank lines.\n", static_cast<long long>(r.blank_lines));
    if (a.opt.skip_bad_lines) std::printf("Skipped %lld bad lines.\n", static_cast<long long>(r.bad_lines));
    for (const auto& p : r.output_prefixes) std::printf("Wrote %s.bin and %s.idx\n", p.c_str(), p.c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return gpt::app::run_tool("preprocess_data", [&] { return run(argc, argv); });
}
