// Cache of pre-token -> ids for the BPE encoders: natural text repeats its words, so most
// pieces skip BPE. A flat open-addressing table; keys and ids live in two arenas so the
// cache makes no per-entry allocations. Bounded: cleared when it holds max_entries, so
// memory does not grow with the corpus. Not thread-safe: one per encoder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpt::data {

class PieceCache {
public:
    explicit PieceCache(std::size_t max_entries);

    // Appends the cached ids of piece to out; false (out untouched) when it is not cached.
    bool lookup(std::string_view piece, std::vector<std::int32_t>& out);
    // Remembers the ids of a piece that lookup did not find.
    void insert(std::string_view piece, const std::vector<std::int32_t>& ids);

    // Pieces longer than this (long whitespace or symbol runs) are rare and not worth caching.
    static constexpr std::size_t kMaxPiece = 64;

private:
    // 32 bytes. The full hash and the key's first 8 bytes decide most lookups without
    // touching the key arena (most English pieces are at most 8 bytes long).
    struct Slot {
        std::uint64_t hash = 0;     // 0: empty (hashes are forced non-zero)
        std::uint64_t prefix = 0;   // first min(8, len) key bytes, zero-padded
        std::uint32_t key_off = 0;
        std::uint16_t key_len = 0;
        std::uint16_t ids_len = 0;
        std::uint32_t ids_off = 0;
    };
    Slot& find(std::string_view key, std::uint64_t h, std::uint64_t prefix);
    void clear();
    void grow();

    std::vector<Slot> slots_;
    std::string keys_;
    std::vector<std::int32_t> ids_;
    std::size_t used_ = 0;
    std::size_t max_entries_;
};

}  // namespace gpt::data
