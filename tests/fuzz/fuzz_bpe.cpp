// The GPT-2 tokenizer on arbitrary bytes, with the committed GPT-2 vocabulary and merges.
// Oracles:
//   - decode(encode(x)) == x (byte-level BPE loses nothing, valid UTF-8 or not);
//   - Gpt2Encoder with a tiny cache (cleared every few pieces), encoding x twice, gives the
//     same ids as Gpt2Tokenizer::encode (the cache never changes a result);
//   - bpe() of a piece equals a reference BPE written here from GPT-2's encoder.py: repeatedly
//     merge every left-to-right occurrence of the lowest-ranked adjacent pair, on byte
//     strings, with ranks read from the merges file by this file's own parser.
#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "text/gpt2_tokenizer.hpp"
#include "fuzz_util.hpp"

using gpt::data::Gpt2Encoder;
using gpt::data::Gpt2Tokenizer;

namespace {

struct Reference {
    std::map<std::pair<std::string, std::string>, int> rank;
    std::unordered_map<std::string, std::int32_t> id_of;  // token bytes -> id
};

const Gpt2Tokenizer* g_tok = nullptr;
const Reference* g_ref = nullptr;

// GPT-2's bytes_to_unicode, inverted: the character of each byte in the files -> the byte.
std::map<std::uint32_t, char> unicode_to_byte() {
    std::map<std::uint32_t, char> m;
    std::uint32_t extra = 256;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        m[printable ? std::uint32_t(b) : extra++] = static_cast<char>(b);
    }
    return m;
}

std::string to_bytes(const std::string& token, const std::map<std::uint32_t, char>& u2b) {
    std::string out;
    for (std::size_t i = 0; i < token.size();) {
        const unsigned char c = static_cast<unsigned char>(token[i]);
        // The merges file only holds code points below U+0800 (the byte table's range).
        std::uint32_t cp = c;
        std::size_t len = 1;
        if (c >= 0xC0) {
            cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(token[i + 1]) & 0x3Fu);
            len = 2;
        }
        out.push_back(u2b.at(cp));
        i += len;
    }
    return out;
}

std::vector<std::int32_t> reference_bpe(std::string_view piece) {
    std::vector<std::string> parts;
    for (char c : piece) parts.emplace_back(1, c);
    for (;;) {
        int best = -1;
        std::pair<std::string, std::string> best_pair;
        for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
            auto it = g_ref->rank.find({parts[i], parts[i + 1]});
            if (it != g_ref->rank.end() && (best < 0 || it->second < best)) {
                best = it->second;
                best_pair = it->first;
            }
        }
        if (best < 0) break;
        std::vector<std::string> merged;
        for (std::size_t i = 0; i < parts.size();) {
            if (i + 1 < parts.size() && parts[i] == best_pair.first && parts[i + 1] == best_pair.second) {
                merged.push_back(parts[i] + parts[i + 1]);
                i += 2;
            } else {
                merged.push_back(parts[i++]);
            }
        }
        parts = std::move(merged);
    }
    std::vector<std::int32_t> ids;
    for (const auto& p : parts) ids.push_back(g_ref->id_of.at(p));
    return ids;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const std::string dir = GPT_FUZZ_SOURCE_DIR "/data/gpt2/";
    static const Gpt2Tokenizer tok = Gpt2Tokenizer::load(dir + "gpt2-vocab.json", dir + "gpt2-merges.txt");
    static Reference ref;
    for (std::int32_t id = 0; id < tok.vocab_size(); ++id) ref.id_of[tok.token_bytes(id)] = id;
    const auto u2b = unicode_to_byte();
    std::ifstream in(dir + "gpt2-merges.txt");
    std::string line;
    int rank = 0;
    while (std::getline(in, line)) {
        if (line.empty() || line.starts_with("#version")) continue;
        const auto sp = line.find(' ');
        ref.rank[{to_bytes(line.substr(0, sp), u2b), to_bytes(line.substr(sp + 1), u2b)}] = rank++;
    }
    if (rank < 50000) gpt::fuzz::fail("could not read the merges file");
    g_tok = &tok;
    g_ref = &ref;
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const std::vector<std::int32_t> ids = g_tok->encode(text);
    if (g_tok->decode(ids) != text) gpt::fuzz::fail("decode(encode(x)) != x");

    Gpt2Encoder cached(*g_tok, 4);
    for (int pass = 0; pass < 2; ++pass) {
        std::vector<std::int32_t> again;
        cached.encode(text, again);
        if (again != ids) gpt::fuzz::fail("Gpt2Encoder (pass " + std::to_string(pass) + ") differs from encode()");
    }

    // The reference is quadratic: compare bpe() on a bounded prefix treated as one piece.
    const std::string_view piece = text.substr(0, 128);
    std::vector<std::int32_t> got;
    g_tok->bpe(piece, got);
    if (got != reference_bpe(piece)) gpt::fuzz::fail("bpe() differs from the reference BPE");
    return 0;
}
