// Gpt2Encoder: pre-tokenise, then look each piece up in the piece cache before falling back
// to BPE.
#include "text/gpt2_tokenizer.hpp"
#include "text/piece_cache.hpp"
#include "text/pretokenize.hpp"

namespace gpt::data {

struct Gpt2Encoder::Cache : PieceCache {
    using PieceCache::PieceCache;
};

Gpt2Encoder::Gpt2Encoder(const Gpt2Tokenizer& tok, std::size_t max_entries)
    : tok_(tok), cache_(std::make_unique<Cache>(max_entries)) {}

Gpt2Encoder::~Gpt2Encoder() = default;

std::unique_ptr<TextEncoder> Gpt2Tokenizer::make_encoder() const { return std::make_unique<Gpt2Encoder>(*this); }

void Gpt2Encoder::encode(std::string_view text, std::vector<std::int32_t>& out) {
    for_each_piece(text, [&](std::size_t b, std::size_t e) {
        const std::string_view piece = text.substr(b, e - b);
        if (cache_->lookup(piece, out)) return;
        scratch_.clear();
        tok_.bpe(piece, scratch_);
        out.insert(out.end(), scratch_.begin(), scratch_.end());
        cache_->insert(piece, scratch_);
    });
}

}  // namespace gpt::data
