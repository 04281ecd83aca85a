// preprocess_data's checks on its values alone (the lib/config/validate* style): no file is
// read, so a bad command line fails before any output.
#include "core/errors.hpp"
#include "text/preprocess_options.hpp"

namespace gpt::data {

void validate_preprocess_args(const PreprocessArgs& a) {
    if (a.tokenizer_type != "GPT2BPETokenizer" && a.tokenizer_type != "TikTokenizer")
        GPT_THROW(UsageError, "--tokenizer-type ", a.tokenizer_type, " is not supported (GPT2BPETokenizer or TikTokenizer)");
    if (a.tokenizer_type == "GPT2BPETokenizer" && (a.vocab_file.empty() || a.merge_file.empty()))
        GPT_THROW(UsageError, "--tokenizer-type GPT2BPETokenizer needs --vocab-file and --merge-file");
    if (a.tokenizer_type == "TikTokenizer") {
        TikTokenizer::parse_pattern(a.tik.pattern);  // before any output: a usage error
        if (a.tik.path.empty()) GPT_THROW(UsageError, "--tokenizer-type TikTokenizer needs --tokenizer-model (a tiktoken rank file)");
    }
    if (a.dataset_impl_given && a.dataset_impl != "mmap")
        GPT_THROW(UsageError, "--dataset-impl ", a.dataset_impl, " is not supported (only mmap)");
    if (a.split_sentences || a.keep_newlines)
        GPT_THROW(UsageError, "--split-sentences / --keep-newlines (NLTK sentence splitting) are not supported");
    if (a.partitions != 1) GPT_THROW(UsageError, "--partitions ", a.partitions, " is not supported; use --workers");
    if (a.make_vocab_size_divisible_by < 1 || a.tensor_model_parallel_size < 1)
        GPT_THROW(UsageError, "--make-vocab-size-divisible-by and --tensor-model-parallel-size must be >= 1");
}

}  // namespace gpt::data
