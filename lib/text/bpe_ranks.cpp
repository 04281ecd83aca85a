#include "text/bpe_ranks.hpp"

#include <algorithm>
#include <climits>
#include <functional>

namespace gpt::data {

namespace {

std::uint64_t mix(std::uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

std::uint64_t key_of(std::int32_t left, std::int32_t right) {
    return (std::uint64_t(std::uint32_t(left)) << 32) | std::uint32_t(right);
}

}  // namespace

void BpeRanks::reset(std::size_t max_pairs, Rule rule) {
    // Load factor at most 1/2, so a probe always reaches an empty slot.
    std::size_t cap = 1;
    while (cap < 2 * std::max<std::size_t>(max_pairs, 1)) cap <<= 1;
    slots_.assign(cap, Slot{});
    rule_ = rule;
}

const BpeRanks::Slot* BpeRanks::find(std::int32_t left, std::int32_t right) const {
    const std::uint64_t key = key_of(left, right);
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t h = mix(key) & mask;; h = (h + 1) & mask) {
        const Slot& s = slots_[h];
        if (s.pair == key) return &s;
        if (s.pair == kEmpty) return nullptr;
    }
}

void BpeRanks::add(std::int32_t left, std::int32_t right, std::int32_t rank, std::int32_t merged) {
    const std::uint64_t key = key_of(left, right);
    const std::size_t mask = slots_.size() - 1;
    std::size_t h = mix(key) & mask;
    while (slots_[h].pair != kEmpty && slots_[h].pair != key) h = (h + 1) & mask;
    slots_[h] = Slot{key, rank, merged};
}

void BpeRanks::bpe(std::string_view piece, std::vector<std::int32_t>& out) const {
    // Long space-free pieces (base64, DNA, one huge word) would make the rescanning loop
    // below quadratic: 50 s for 1 MB. Beyond a few dozen bytes the heap version wins.
    if (piece.size() > kShortPiece) return bpe_long(piece, out);
    std::int32_t w[kShortPiece];
    std::size_t n = piece.size();
    for (std::size_t i = 0; i < n; ++i) w[i] = byte_token_[static_cast<unsigned char>(piece[i])];
    while (n > 1) {
        std::int32_t best_rank = INT32_MAX;
        std::size_t best = 0;
        const Slot* best_slot = nullptr;
        for (std::size_t i = 0; i + 1 < n; ++i) {
            const Slot* s = find(w[i], w[i + 1]);
            if (s && s->rank < best_rank) {
                best_rank = s->rank;
                best = i;
                best_slot = s;
            }
        }
        if (!best_slot) break;
        const std::int32_t a = w[best], b = w[best + 1];
        std::size_t o = best;
        bool merged_one = false;
        for (std::size_t i = best; i < n;) {
            if (i + 1 < n && w[i] == a && w[i + 1] == b && !(merged_one && rule_ == Rule::Leftmost)) {
                w[o++] = best_slot->merged;
                i += 2;
                merged_one = true;
            } else {
                w[o++] = w[i++];
            }
        }
        n = o;
    }
    out.insert(out.end(), w, w + n);
}

void BpeRanks::bpe_long(std::string_view piece, std::vector<std::int32_t>& out) const {
    // The same merges in the same order, in O(n log n): the parts form a linked list, and a
    // min-heap holds every adjacent pair that has a merge, keyed by (rank, position of its
    // left part), so each pop is the leftmost lowest-ranked pair (tiktoken's rule). GPT-2
    // merges all occurrences of the lowest-ranked pair left to right, and a merge only
    // creates pairs of higher rank (a merge's result did not exist when the lower ranks were
    // learned), so popping by (rank, position) is the same sequence. An entry is stale when
    // its left part is gone or either part changed since it was pushed.
    const auto n = static_cast<std::int32_t>(piece.size());
    std::vector<std::int32_t> tok(static_cast<std::size_t>(n)), next(static_cast<std::size_t>(n)),
        prev(static_cast<std::size_t>(n));
    for (std::int32_t i = 0; i < n; ++i) {
        tok[i] = byte_token_[static_cast<unsigned char>(piece[static_cast<std::size_t>(i)])];
        next[i] = i + 1 < n ? i + 1 : -1;
        prev[i] = i - 1;
    }
    struct Candidate {
        std::int32_t rank, left, left_tok, right_tok;
        bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };
    std::vector<Candidate> heap;
    const auto push = [&](std::int32_t left) {
        const std::int32_t right = left >= 0 ? next[left] : -1;
        if (left < 0 || right < 0) return;
        if (const Slot* s = find(tok[left], tok[right])) {
            heap.push_back({s->rank, left, tok[left], tok[right]});
            std::push_heap(heap.begin(), heap.end(), std::greater<>());
        }
    };
    for (std::int32_t i = 0; i + 1 < n; ++i) push(i);
    constexpr std::int32_t kGone = -2;
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), std::greater<>());
        const Candidate c = heap.back();
        heap.pop_back();
        const std::int32_t l = c.left;
        if (prev[l] == kGone) continue;
        const std::int32_t r = next[l];
        if (r < 0 || tok[l] != c.left_tok || tok[r] != c.right_tok) continue;
        tok[l] = find(tok[l], tok[r])->merged;
        next[l] = next[r];
        if (next[r] >= 0) prev[next[r]] = l;
        prev[r] = kGone;
        push(prev[l]);
        push(l);
    }
    for (std::int32_t i = 0; i >= 0 && i < n; i = next[i]) out.push_back(tok[i]);
}

}  // namespace gpt::data
