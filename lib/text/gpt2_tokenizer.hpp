// GPT-2 byte-level BPE (Megatron's GPT2BPETokenizer): vocab + merges files, the pre-tokenisation
// pattern, the byte-to-unicode table and merge ranks. Gives the reference encoder's ids for any
// UTF-8 text.
//
// A literal "<|endoftext|>" inside text is encoded as plain text (its characters' BPE tokens),
// as tiktoken's encode_ordinary and Megatron's GPT-2 tokenizer do: documents are separated by
// --append-eod, never by markers in the corpus.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/bpe_ranks.hpp"
#include "text/text_tokenizer.hpp"

namespace gpt::data {

class Gpt2Tokenizer : public TextTokenizer {
public:
    // Throws IoError when a file cannot be read and DataError (naming the file and line) when
    // it is malformed or the two files do not belong together.
    static Gpt2Tokenizer load(const std::string& vocab_file, const std::string& merge_file);

    int vocab_size() const override { return static_cast<int>(id_to_bytes_.size()); }  // unpadded: 50257
    std::int32_t eod() const override { return eod_; }                                // <|endoftext|>

    // Convenience encode without a persistent cache; use Gpt2Encoder in loops.
    std::vector<std::int32_t> encode(std::string_view text) const;
    std::unique_ptr<TextEncoder> make_encoder() const override;
    // The bytes the ids stand for; an id outside the vocabulary is a DataError.
    std::string decode(std::span<const std::int32_t> ids) const;
    const std::string& token_bytes(std::int32_t id) const { return id_to_bytes_.at(static_cast<std::size_t>(id)); }

    // BPE of one pre-token (its raw bytes); appends the ids to out.
    void bpe(std::string_view piece, std::vector<std::int32_t>& out) const { merges_.bpe(piece, out); }
    // bpe's heap-based path (tests compare the two paths on the same pieces).
    void bpe_long(std::string_view piece, std::vector<std::int32_t>& out) const { merges_.bpe_long(piece, out); }
    static constexpr std::size_t kShortPiece = BpeRanks::kShortPiece;

private:
    std::vector<std::string> id_to_bytes_;
    BpeRanks merges_;
    std::int32_t eod_ = -1;
};

// Encodes with a per-thread cache of pre-token -> ids (natural text repeats its words, so
// most pieces skip BPE). Not thread-safe: give each thread its own. The cache is bounded
// (cleared when it holds max_entries) so memory does not grow with the corpus.
class Gpt2Encoder : public TextEncoder {
public:
    explicit Gpt2Encoder(const Gpt2Tokenizer& tok, std::size_t max_entries = 1u << 20);
    ~Gpt2Encoder();
    Gpt2Encoder(const Gpt2Encoder&) = delete;
    Gpt2Encoder& operator=(const Gpt2Encoder&) = delete;

    void encode(std::string_view text, std::vector<std::int32_t>& out) override;  // appends

private:
    struct Cache;
    const Gpt2Tokenizer& tok_;
    std::unique_ptr<Cache> cache_;
    std::vector<std::int32_t> scratch_;
};

}  // namespace gpt::data
