// The end-of-document token of a run's data, for --eod-mask-loss, --reset-position-ids and
// --reset-attention-mask (Megatron's tokenizer.eod).
#pragma once

#include <cstdint>

#include "config/config.hpp"
#include "text/tiktoken_tokenizer.hpp"

namespace gpt::train {

// --tokenizer-model and the --tiktoken-* flags as the TikTokenizer loader takes them, cut to
// cfg.model.vocab_size (0: the file's whole vocabulary).
data::TikTokenizerOptions tiktoken_options(const Config& cfg);

// The tokenizer's EOD (<|endoftext|> of the GPT-2 vocabulary, </s> of a TikTokenizer), or
// for --mock-data without tokenizer files the synthetic data's own (vocab size - 1).
// UsageError when the run names no tokenizer (real data read with --vocab-size alone) or
// the token lies outside the vocabulary.
std::int32_t end_of_document_token(const Config& cfg);

}  // namespace gpt::train
