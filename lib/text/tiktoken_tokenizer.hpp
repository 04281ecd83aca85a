// Megatron's TikTokenizer (CustomTikTokenizer): byte-level BPE from a tiktoken rank file
// with one of the split patterns of tiktoken_split.hpp. Ids: the special tokens first
// (0 .. num_special_tokens-1: <unk> <s> </s>, then the user's, then <SPECIAL_i> fillers),
// then rank r as id r + num_special_tokens. Encoding is tiktoken's encode_ordinary: special
// token text in a document is plain text. The end-of-document id is </s>'s, as in Megatron.
//
// Rank files: tiktoken's text format (cl100k_base.tiktoken: one "base64-bytes rank" per
// line) or Megatron's JSON list of {"rank", "token_bytes" (base64), "token_str"}. Ranks must
// be 0..N-1, each once, and every single byte must be a token.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/bpe_ranks.hpp"
#include "text/text_tokenizer.hpp"
#include "text/tiktoken_split.hpp"

namespace gpt::data {

struct TikTokenizerOptions {
    std::string path;                        // --tokenizer-model
    std::string pattern;                     // --tiktoken-pattern: v1 v2 cl100k_base o200k_base
    int num_special_tokens = 1000;           // --tiktoken-num-special-tokens
    std::vector<std::string> special_tokens; // --tiktoken-special-tokens; empty: <unk> <s> </s>
    // --vocab-size: the whole vocabulary, special tokens included; the rank file is cut to
    // vocab_size - num_special_tokens ranks, as Megatron does. 0: all ranks + special tokens.
    int vocab_size = 0;
};

class TikTokenizer : public TextTokenizer {
public:
    // UsageError for bad options, IoError when the file cannot be read, DataError (naming the
    // file and line) when it is malformed.
    static TikTokenizer load(const TikTokenizerOptions& options);
    static TikPattern parse_pattern(const std::string& name);  // UsageError when unknown
    // rank_of_ holds views into rank_bytes_: a move keeps them valid, a copy would not.
    TikTokenizer(TikTokenizer&&) = default;
    TikTokenizer(const TikTokenizer&) = delete;
    TikTokenizer& operator=(const TikTokenizer&) = delete;

    int vocab_size() const override { return num_special_ + static_cast<int>(rank_bytes_.size()); }
    std::int32_t eod() const override { return eod_; }
    int num_special_tokens() const { return num_special_; }
    int num_ranks() const { return static_cast<int>(rank_bytes_.size()); }
    TikPattern pattern() const { return pattern_; }
    const std::vector<std::string>& special_tokens() const { return special_; }

    std::vector<std::int32_t> encode(std::string_view text) const;  // convenience, no cache
    std::unique_ptr<TextEncoder> make_encoder() const override;
    // The bytes the ids stand for (a special token gives its text); DataError outside the vocab.
    std::string decode(std::span<const std::int32_t> ids) const;

    // BPE of one pre-token (raw bytes): its own id when it is a token, as tiktoken does,
    // else the merges. Appends ids (offset by num_special_tokens) to out.
    void encode_piece(std::string_view piece, std::vector<std::int32_t>& out) const;

private:
    TikTokenizer() = default;
    TikPattern pattern_ = TikPattern::Cl100k;
    int num_special_ = 0;
    std::int32_t eod_ = 0;
    std::vector<std::string> special_;
    std::vector<std::string> rank_bytes_;
    std::unordered_map<std::string_view, std::int32_t> rank_of_;  // views into rank_bytes_
    BpeRanks merges_;
};

}  // namespace gpt::data
