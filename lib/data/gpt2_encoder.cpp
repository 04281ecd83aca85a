// Gpt2Encoder: pre-tokenise, then look each piece up in a flat open-addressing cache before
// falling back to BPE. Keys and ids live in two arenas so the cache makes no per-entry
// allocations; clearing it is O(1) amortised.
#include <algorithm>
#include <cstring>

#include "data/gpt2_tokenizer.hpp"
#include "data/pretokenize.hpp"

namespace gpt::data {

namespace {

// Pieces longer than this (long whitespace or symbol runs) are rare and not worth caching.
constexpr std::size_t kMaxCachedPiece = 64;

std::uint64_t hash_bytes(const char* p, std::size_t n) {
    std::uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        std::uint64_t w;
        std::memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    if (n > 0) {
        std::uint64_t w = 0;
        std::memcpy(&w, p, n);
        h = (h ^ w) * 0x94d049bb133111ebull;
    }
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

}  // namespace

struct Gpt2Encoder::Cache {
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
    std::vector<Slot> slots;
    std::string keys;
    std::vector<std::int32_t> ids;
    std::size_t used = 0;
    std::size_t max_entries;

    explicit Cache(std::size_t max) : slots(1024), max_entries(max) {}

    void clear() {
        std::fill(slots.begin(), slots.end(), Slot{});
        keys.clear();
        ids.clear();
        used = 0;
    }

    static std::uint64_t prefix_of(std::string_view key) {
        std::uint64_t p = 0;
        std::memcpy(&p, key.data(), std::min<std::size_t>(8, key.size()));
        return p;
    }

    // Returns the slot for the key: a hit (hash set) or the empty slot to fill.
    Slot& find(std::string_view key, std::uint64_t h, std::uint64_t prefix) {
        const std::size_t mask = slots.size() - 1;
        for (std::size_t i = h & mask;; i = (i + 1) & mask) {
            Slot& s = slots[i];
            if (s.hash == 0) return s;
            if (s.hash == h && s.prefix == prefix && s.key_len == key.size() &&
                (key.size() <= 8 || std::memcmp(keys.data() + s.key_off + 8, key.data() + 8, key.size() - 8) == 0))
                return s;
        }
    }

    void grow() {
        std::vector<Slot> old(slots.size() * 2);
        old.swap(slots);
        const std::size_t mask = slots.size() - 1;
        for (const Slot& s : old) {
            if (s.hash == 0) continue;
            std::size_t i = s.hash & mask;
            while (slots[i].hash != 0) i = (i + 1) & mask;
            slots[i] = s;
        }
    }
};

Gpt2Encoder::Gpt2Encoder(const Gpt2Tokenizer& tok, std::size_t max_entries)
    : tok_(tok), cache_(std::make_unique<Cache>(max_entries)) {}

Gpt2Encoder::~Gpt2Encoder() = default;

void Gpt2Encoder::encode(std::string_view text, std::vector<std::int32_t>& out) {
    Cache& c = *cache_;
    for_each_piece(text, [&](std::size_t b, std::size_t e) {
        std::string_view piece = text.substr(b, e - b);
        if (piece.size() > kMaxCachedPiece) {
            tok_.bpe(piece, out);
            return;
        }
        const std::uint64_t h = hash_bytes(piece.data(), piece.size()) | 1u;
        const std::uint64_t prefix = Cache::prefix_of(piece);
        Cache::Slot* s = &c.find(piece, h, prefix);
        if (s->hash != 0) {
            const std::int32_t* p = c.ids.data() + s->ids_off;
            if (s->ids_len == 1) out.push_back(*p);
            else out.insert(out.end(), p, p + s->ids_len);
            return;
        }
        scratch_.clear();
        tok_.bpe(piece, scratch_);
        out.insert(out.end(), scratch_.begin(), scratch_.end());
        if (c.used >= c.max_entries) {
            c.clear();
            s = &c.find(piece, h, prefix);
        } else if (2 * (c.used + 1) > c.slots.size()) {
            c.grow();
            s = &c.find(piece, h, prefix);
        }
        s->hash = h;
        s->prefix = prefix;
        s->key_off = static_cast<std::uint32_t>(c.keys.size());
        s->key_len = static_cast<std::uint16_t>(piece.size());
        s->ids_off = static_cast<std::uint32_t>(c.ids.size());
        s->ids_len = static_cast<std::uint16_t>(scratch_.size());
        c.keys.append(piece);
        c.ids.insert(c.ids.end(), scratch_.begin(), scratch_.end());
        ++c.used;
    });
}

}  // namespace gpt::data
