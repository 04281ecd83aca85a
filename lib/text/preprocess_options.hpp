// preprocess_data's flags (Megatron's tools/preprocess_data.py), in the style every tool
// shares (config/flag_parser.hpp): the corpus and output (PreprocessOptions), the tokenizer,
// the padded-vocabulary report, and Megatron flags kept so old command lines still parse.
#pragma once

#include <string>
#include <vector>

#include "text/preprocess.hpp"
#include "text/tiktoken_tokenizer.hpp"

namespace gpt::data {

struct PreprocessArgs {
    PreprocessOptions opt;
    TikTokenizerOptions tik;
    std::string vocab_file, merge_file;
    std::string tokenizer_type = "GPT2BPETokenizer";
    std::string dataset_impl;
    bool dataset_impl_given = false;  // --dataset-impl on the command line, even as ""
    int make_vocab_size_divisible_by = 128;
    int tensor_model_parallel_size = 1;
    int partitions = 1;
    bool split_sentences = false, keep_newlines = false;
    bool help = false;
};

// Reads the flags (the values and the required --input and --output-prefix: UsageError,
// Boost's text followed by " (see --help)", as the tool always printed it), then checks them
// (validate_preprocess_args), unless --help or no argument asks for the usage.
PreprocessArgs parse_preprocess_args(const std::vector<std::string>& args);
// The checks on the values alone, before any file is read: UsageError.
void validate_preprocess_args(const PreprocessArgs& a);
std::string preprocess_usage();

}  // namespace gpt::data
