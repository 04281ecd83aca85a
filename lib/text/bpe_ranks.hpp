// Byte-level BPE merging on ranked pairs, shared by GPT-2's tokenizer (merges file) and the
// tiktoken tokenizer (rank file: a pair merges when the concatenation of its bytes is a
// token, with that token's rank). The pair table is open addressing keyed by (left, right).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace gpt::data {

class BpeRanks {
public:
    // How the short path picks merges. GPT-2 merges every occurrence of the lowest-ranked
    // pair, left to right; tiktoken merges only the leftmost lowest-ranked pair, then looks
    // again. Both equal the heap order of bpe_long for vocabularies learned by BPE.
    enum class Rule { AllOccurrences, Leftmost };

    // Sizes the table for at most max_pairs distinct pairs.
    void reset(std::size_t max_pairs, Rule rule);
    // A repeated pair takes the later call's rank, as GPT-2's dict(zip(merges, ranks)) does.
    void add(std::int32_t left, std::int32_t right, std::int32_t rank, std::int32_t merged);
    void set_byte_token(int byte, std::int32_t id) { byte_token_[byte] = id; }

    // BPE of one piece (its raw bytes); appends the ids to out.
    void bpe(std::string_view piece, std::vector<std::int32_t>& out) const;
    // bpe's heap-based path, used above kShortPiece bytes; public so tests can compare the
    // two paths on the same pieces.
    void bpe_long(std::string_view piece, std::vector<std::int32_t>& out) const;
    static constexpr std::size_t kShortPiece = 64;

private:
    struct Slot {
        std::uint64_t pair = kEmpty;  // (left id << 32) | right id
        std::int32_t rank = 0;
        std::int32_t merged = 0;
    };
    static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};

    const Slot* find(std::int32_t left, std::int32_t right) const;

    std::vector<Slot> slots_;  // power-of-two size
    std::int32_t byte_token_[256] = {};
    Rule rule_ = Rule::AllOccurrences;
};

}  // namespace gpt::data
