#include "data/gpt2_tokenizer.hpp"

#include <algorithm>
#include <functional>
#include <climits>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "core/errors.hpp"
#include "data/json.hpp"
#include "data/utf8.hpp"

namespace gpt::data {

namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other 68 bytes
// to U+0100.. in byte order, so every byte has a visible character in the vocab files.
std::vector<std::uint32_t> byte_to_unicode() {
    std::vector<std::uint32_t> map(256);
    std::vector<bool> printable(256, false);
    for (int b = '!'; b <= '~'; ++b) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    std::uint32_t next = 256;
    for (int b = 0; b < 256; ++b) map[b] = printable[b] ? std::uint32_t(b) : next++;
    return map;
}

std::string read_file(const std::string& path, const char* what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) GPT_THROW(IoError, "cannot open ", what, " '", path, "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) GPT_THROW(IoError, "cannot read ", what, " '", path, "'");
    return ss.str();
}

std::uint64_t mix(std::uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

}  // namespace

Gpt2Tokenizer Gpt2Tokenizer::load(const std::string& vocab_file, const std::string& merge_file) {
    Gpt2Tokenizer t;
    const std::vector<std::uint32_t> b2u = byte_to_unicode();
    std::unordered_map<std::uint32_t, int> u2b;
    for (int b = 0; b < 256; ++b) u2b[b2u[b]] = b;

    // Vocabulary: {"token": id, ...}, ids dense in [0, size).
    std::unordered_map<std::string, std::int32_t> ids;
    {
        std::string text = read_file(vocab_file, "vocab file");
        std::vector<std::pair<std::string, std::int64_t>> entries;
        try {
            JsonCursor cur(text);
            if (cur.peek() != '{') cur.fail("expected a JSON object of token -> id");
            cur.for_each_member([&](const std::string& key) { entries.emplace_back(key, cur.parse_int()); });
            if (!cur.at_end()) cur.fail("extra data after the JSON object");
        } catch (const DataError& e) {
            GPT_THROW(DataError, "vocab file '", vocab_file, "': ", e.what(),
                      " (expected GPT-2's encoder.json / gpt2-vocab.json; did you swap --vocab-file and --merge-file?)");
        }
        const std::size_t n = entries.size();
        if (n < 256) GPT_THROW(DataError, "vocab file '", vocab_file, "': only ", n, " tokens; a byte-level BPE vocabulary has at least 256");
        t.id_to_bytes_.assign(n, std::string());
        std::vector<bool> seen(n, false);
        for (auto& [token, id] : entries) {
            if (id < 0 || id >= static_cast<std::int64_t>(n) || seen[static_cast<std::size_t>(id)])
                GPT_THROW(DataError, "vocab file '", vocab_file, "': token ids must be 0..", n - 1,
                          " each used once; '", token, "' has id ", id);
            seen[static_cast<std::size_t>(id)] = true;
            // Token text -> the raw bytes it stands for, through the inverse byte table.
            std::string bytes;
            for (std::size_t i = 0; i < token.size();) {
                std::uint32_t cp = 0;
                int len = utf8::decode(token, i, cp);
                auto it = len ? u2b.find(cp) : u2b.end();
                if (it == u2b.end())
                    GPT_THROW(DataError, "vocab file '", vocab_file, "': token '", token,
                              "' has a character outside GPT-2's byte-to-unicode table");
                bytes.push_back(static_cast<char>(it->second));
                i += static_cast<std::size_t>(len);
            }
            t.id_to_bytes_[static_cast<std::size_t>(id)] = bytes;
            ids.emplace(token, static_cast<std::int32_t>(id));
        }
        for (int b = 0; b < 256; ++b) {
            std::string ch;
            utf8::append(ch, b2u[b]);
            auto it = ids.find(ch);
            if (it == ids.end())
                GPT_THROW(DataError, "vocab file '", vocab_file, "': no token for byte ", b,
                          "; not a GPT-2 byte-level BPE vocabulary");
            t.byte_token_[b] = it->second;
        }
        auto eod = ids.find("<|endoftext|>");
        if (eod == ids.end()) GPT_THROW(DataError, "vocab file '", vocab_file, "': no <|endoftext|> token");
        t.eod_ = eod->second;
    }

    // Merges: "#version" line, then "left right" per line in rank order.
    {
        std::string text = read_file(merge_file, "merge file");
        // At most one slot per line: a file may hold more distinct merges than tokens (every
        // split of a long token), and a full open-addressing table would never find a slot.
        const std::size_t lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
        std::size_t cap = 1;
        while (cap < 2 * std::max(ids.size(), lines)) cap <<= 1;
        t.merges_.assign(cap, MergeSlot{});
        std::size_t pos = 0, line_no = 0;
        std::int32_t rank = 0;
        while (pos < text.size()) {
            std::size_t eol = text.find('\n', pos);
            if (eol == std::string::npos) eol = text.size();
            std::string_view line(text.data() + pos, eol - pos);
            pos = eol + 1;
            ++line_no;
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
            if (line_no == 1 && line.starts_with("#version")) continue;
            if (line.empty()) {
                if (pos >= text.size()) break;  // the file's final newline
                GPT_THROW(DataError, "merge file '", merge_file, "' line ", line_no, ": empty line");
            }
            std::size_t sp = line.find(' ');
            if (sp == std::string_view::npos || sp == 0 || sp + 1 >= line.size() ||
                line.find(' ', sp + 1) != std::string_view::npos)
                GPT_THROW(DataError, "merge file '", merge_file, "' line ", line_no,
                          ": expected 'left right', got '", line.substr(0, 80), "'",
                          line_no == 1 && line.starts_with("{") ? " (this looks like the vocab file; did you swap --vocab-file and --merge-file?)" : "");
            std::string left(line.substr(0, sp)), right(line.substr(sp + 1));
            auto l = ids.find(left), r = ids.find(right), m = ids.find(left + right);
            if (l == ids.end() || r == ids.end() || m == ids.end())
                GPT_THROW(DataError, "merge file '", merge_file, "' line ", line_no, ": merge '", line,
                          "' uses a token that is not in vocab file '", vocab_file,
                          "' (the vocab and merges files do not belong together)");
            // A repeated merge takes its later rank, as GPT-2's dict(zip(merges, ranks)) does.
            t.add_merge(l->second, r->second, rank, m->second);
            ++rank;
        }
        if (rank == 0) GPT_THROW(DataError, "merge file '", merge_file, "' has no merges");
    }
    return t;
}

const Gpt2Tokenizer::MergeSlot* Gpt2Tokenizer::find_merge(std::int32_t left, std::int32_t right) const {
    const std::uint64_t key = (std::uint64_t(std::uint32_t(left)) << 32) | std::uint32_t(right);
    const std::size_t mask = merges_.size() - 1;
    for (std::size_t h = mix(key) & mask;; h = (h + 1) & mask) {
        const MergeSlot& s = merges_[h];
        if (s.pair == key) return &s;
        if (s.pair == kEmpty) return nullptr;
    }
}

void Gpt2Tokenizer::add_merge(std::int32_t left, std::int32_t right, std::int32_t rank, std::int32_t merged) {
    const std::uint64_t key = (std::uint64_t(std::uint32_t(left)) << 32) | std::uint32_t(right);
    const std::size_t mask = merges_.size() - 1;
    std::size_t h = mix(key) & mask;
    while (merges_[h].pair != kEmpty && merges_[h].pair != key) h = (h + 1) & mask;
    merges_[h] = MergeSlot{key, rank, merged};
}

void Gpt2Tokenizer::bpe(std::string_view piece, std::vector<std::int32_t>& out) const {
    // Long space-free pieces (base64, DNA, one huge word) would make the rescanning loop
    // below quadratic: 50 s for 1 MB. Beyond a few dozen bytes the heap version wins.
    if (piece.size() > kShortPiece) return bpe_long(piece, out);
    // GPT-2's algorithm: repeatedly merge every occurrence of the lowest-ranked adjacent pair.
    std::int32_t w[kShortPiece];
    std::size_t n = piece.size();
    for (std::size_t i = 0; i < n; ++i) w[i] = byte_token_[static_cast<unsigned char>(piece[i])];
    while (n > 1) {
        std::int32_t best_rank = INT32_MAX;
        std::size_t best = 0;
        const MergeSlot* best_slot = nullptr;
        for (std::size_t i = 0; i + 1 < n; ++i) {
            const MergeSlot* s = find_merge(w[i], w[i + 1]);
            if (s && s->rank < best_rank) {
                best_rank = s->rank;
                best = i;
                best_slot = s;
            }
        }
        if (!best_slot) break;
        const std::int32_t a = w[best], b = w[best + 1];
        std::size_t o = best;
        for (std::size_t i = best; i < n;) {
            if (i + 1 < n && w[i] == a && w[i + 1] == b) {
                w[o++] = best_slot->merged;
                i += 2;
            } else {
                w[o++] = w[i++];
            }
        }
        n = o;
    }
    out.insert(out.end(), w, w + n);
}

void Gpt2Tokenizer::bpe_long(std::string_view piece, std::vector<std::int32_t>& out) const {
    // The same merges in the same order, in O(n log n): the parts form a linked list, and a
    // min-heap holds every adjacent pair that has a merge, keyed by (rank, position of its
    // left part). GPT-2 merges all occurrences of the lowest-ranked pair left to right, and
    // a merge only creates pairs of higher rank (a merge's result did not exist when the
    // lower ranks were learned), so popping by (rank, position) is the same sequence. An
    // entry is stale when its left part is gone or either part changed since it was pushed.
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
        if (const MergeSlot* s = find_merge(tok[left], tok[right])) {
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
        tok[l] = find_merge(tok[l], tok[r])->merged;
        next[l] = next[r];
        if (next[r] >= 0) prev[next[r]] = l;
        prev[r] = kGone;
        push(prev[l]);
        push(l);
    }
    for (std::int32_t i = 0; i >= 0 && i < n; i = next[i]) out.push_back(tok[i]);
}

std::vector<std::int32_t> Gpt2Tokenizer::encode(std::string_view text) const {
    Gpt2Encoder enc(*this, 1u << 12);
    std::vector<std::int32_t> out;
    enc.encode(text, out);
    return out;
}

std::string Gpt2Tokenizer::decode(std::span<const std::int32_t> ids) const {
    std::string out;
    for (std::int32_t id : ids) {
        if (id < 0 || id >= vocab_size()) GPT_THROW(DataError, "token id ", id, " is outside the vocabulary [0, ", vocab_size(), ")");
        out += id_to_bytes_[static_cast<std::size_t>(id)];
    }
    return out;
}

}  // namespace gpt::data
