#include "text/piece_cache.hpp"

#include <algorithm>
#include <cstring>

namespace gpt::data {

namespace {

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
    return (h ^ (h >> 32)) | 1u;
}

std::uint64_t prefix_of(std::string_view key) {
    std::uint64_t p = 0;
    std::memcpy(&p, key.data(), std::min<std::size_t>(8, key.size()));
    return p;
}

}  // namespace

PieceCache::PieceCache(std::size_t max_entries) : slots_(1024), max_entries_(max_entries) {}

void PieceCache::clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    keys_.clear();
    ids_.clear();
    used_ = 0;
}

// Returns the slot for the key: a hit (hash set) or the empty slot to fill.
PieceCache::Slot& PieceCache::find(std::string_view key, std::uint64_t h, std::uint64_t prefix) {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
        Slot& s = slots_[i];
        if (s.hash == 0) return s;
        if (s.hash == h && s.prefix == prefix && s.key_len == key.size() &&
            (key.size() <= 8 || std::memcmp(keys_.data() + s.key_off + 8, key.data() + 8, key.size() - 8) == 0))
            return s;
    }
}

void PieceCache::grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    const std::size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
        if (s.hash == 0) continue;
        std::size_t i = s.hash & mask;
        while (slots_[i].hash != 0) i = (i + 1) & mask;
        slots_[i] = s;
    }
}

bool PieceCache::lookup(std::string_view piece, std::vector<std::int32_t>& out) {
    if (piece.size() > kMaxPiece) return false;
    const Slot& s = find(piece, hash_bytes(piece.data(), piece.size()), prefix_of(piece));
    if (s.hash == 0) return false;
    const std::int32_t* p = ids_.data() + s.ids_off;
    if (s.ids_len == 1) out.push_back(*p);
    else out.insert(out.end(), p, p + s.ids_len);
    return true;
}

void PieceCache::insert(std::string_view piece, const std::vector<std::int32_t>& ids) {
    if (piece.size() > kMaxPiece) return;
    const std::uint64_t h = hash_bytes(piece.data(), piece.size());
    const std::uint64_t prefix = prefix_of(piece);
    if (used_ >= max_entries_) clear();
    else if (2 * (used_ + 1) > slots_.size()) grow();
    Slot& s = find(piece, h, prefix);
    s.hash = h;
    s.prefix = prefix;
    s.key_off = static_cast<std::uint32_t>(keys_.size());
    s.key_len = static_cast<std::uint16_t>(piece.size());
    s.ids_off = static_cast<std::uint32_t>(ids_.size());
    s.ids_len = static_cast<std::uint16_t>(ids.size());
    keys_.append(piece);
    ids_.insert(ids_.end(), ids.begin(), ids.end());
    ++used_;
}

}  // namespace gpt::data
