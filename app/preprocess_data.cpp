// preprocess_data: Megatron's tools/preprocess_data.py flags; see lib/text/preprocess.hpp.
// Its flags: lib/text/preprocess_options.hpp.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "core/timer.hpp"
#include "text/gpt2_tokenizer.hpp"
#include "text/tiktoken_tokenizer.hpp"
#include "text/preprocess.hpp"
#include "text/preprocess_options.hpp"
#include "data/temp_files.hpp"

#include "tool_main.hpp"

using namespace gpt;

namespace {

int run(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    const data::PreprocessArgs a = data::parse_preprocess_args(args);
    if (a.help || args.empty()) {
        std::cout << data::preprocess_usage() << "\n";
        return a.help ? 0 : 2;
    }
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
