// Gpt2Encoder: pre-tokenise, then look each piece up in a flat open-addressing cache before
// falling back to BPE. Keys and ids live in two arenas so the cache makes no per-entry
// allocations; clearing it is O(1) amortised.
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
    struct Slot {
        std::uint32_t hash_tag = 0;  // 0: empty (tags are forced non-zero)
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

    // Returns the slot for the key: a hit (hash_tag set) or the empty slot to fill.
    Slot& find(std::string_view key, std::uint64_t h) {
        const std::uint32_t tag = static_cast<std::uint32_t>(h >> 32) | 1u;
        const std::size_t mask = slots.size() - 1;
        for (std::size_t i = h & mask;; i = (i + 1) & mask) {
            Slot& s = slots[i];
            if (s.hash_tag == 0) return s;
            if (s.hash_tag == tag && s.key_len == key.size() && std::memcmp(keys.data() + s.key_off, key.data(), key.size()) == 0)
                return s;
        }
    }

    void grow() {
        std::vector<Slot> old(slots.size() * 2);
        old.swap(slots);
        const std::size_t mask = slots.size() - 1;
        for (const Slot& s : old) {
            if (s.hash_tag == 0) continue;
            std::uint64_t h = hash_bytes(keys.data() + s.key_off, s.key_len);
            std::size_t i = h & mask;
            while (slots[i].hash_tag != 0) i = (i + 1) & mask;
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
        const std::uint64_t h = hash_bytes(piece.data(), piece.size());
        Cache::Slot* s = &c.find(piece, h);
        if (s->hash_tag != 0) {
            const std::int32_t* p = c.ids.data() + s->ids_off;
            out.insert(out.end(), p, p + s->ids_len);
            return;
        }
        scratch_.clear();
        tok_.bpe(piece, scratch_);
        out.insert(out.end(), scratch_.begin(), scratch_.end());
        if (c.used >= c.max_entries) {
            c.clear();
            s = &c.find(piece, h);
        } else if (2 * (c.used + 1) > c.slots.size()) {
            c.grow();
            s = &c.find(piece, h);
        }
        s->hash_tag = static_cast<std::uint32_t>(h >> 32) | 1u;
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
