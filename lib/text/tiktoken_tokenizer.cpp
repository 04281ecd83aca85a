#include "text/tiktoken_tokenizer.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/errors.hpp"
#include "text/json.hpp"
#include "text/piece_cache.hpp"
#include "text/text_lines.hpp"

namespace gpt::data {

namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) GPT_THROW(IoError, "cannot open --tokenizer-model '", path, "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) GPT_THROW(IoError, "cannot read --tokenizer-model '", path, "'");
    return ss.str();
}

// Standard base64 with '=' padding; false on any other character or a bad length.
bool base64_decode(std::string_view in, std::string& out) {
    out.clear();
    if (in.size() % 4 != 0) return false;
    auto value = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    for (std::size_t i = 0; i < in.size(); i += 4) {
        const bool last = i + 4 == in.size();
        const int pad = last ? (in[i + 3] == '=') + (in[i + 2] == '=') : 0;
        if (pad == 1 && in[i + 2] == '=') return false;
        std::uint32_t v = 0;
        for (int k = 0; k < 4; ++k) {
            const int d = k >= 4 - pad ? 0 : value(in[i + k]);
            if (d < 0) return false;
            v = (v << 6) | static_cast<std::uint32_t>(d);
        }
        out.push_back(static_cast<char>(v >> 16));
        if (pad < 2) out.push_back(static_cast<char>((v >> 8) & 0xFF));
        if (pad < 1) out.push_back(static_cast<char>(v & 0xFF));
    }
    return true;
}

// tiktoken's text format: "base64 rank" per line. Returns (bytes, rank) in file order.
std::vector<std::pair<std::string, std::int64_t>> parse_tiktoken_text(const std::string& path, const std::string& text) {
    std::vector<std::pair<std::string, std::int64_t>> out;
    TextLines lines(text);
    std::string_view line;
    while (lines.next(line)) {
        if (line.empty()) continue;
        const std::size_t sp = line.find(' ');
        std::string bytes;
        std::int64_t rank = -1;
        if (sp != std::string_view::npos && sp + 1 < line.size() && base64_decode(line.substr(0, sp), bytes) && !bytes.empty()) {
            rank = 0;
            for (char c : line.substr(sp + 1)) {
                if (c < '0' || c > '9' || rank > (1 << 30)) {
                    rank = -1;
                    break;
                }
                rank = rank * 10 + (c - '0');
            }
        }
        if (rank < 0)
            GPT_THROW(DataError, "--tokenizer-model '", path, "' line ", lines.line_no(),
                      ": expected 'base64-token rank' (tiktoken's .tiktoken format), got '", line.substr(0, 80), "'");
        out.emplace_back(std::move(bytes), rank);
    }
    return out;
}

// Megatron's JSON list: [{"rank": i, "token_bytes": base64, "token_str": ...}, ...].
std::vector<std::pair<std::string, std::int64_t>> parse_megatron_json(const std::string& path, const std::string& text) {
    std::vector<std::pair<std::string, std::int64_t>> out;
    try {
        JsonCursor cur(text);
        cur.expect('[');
        if (!cur.consume(']')) {
            do {
                std::string b64, bytes;
                std::int64_t rank = -1;
                cur.for_each_member([&](const std::string& key) {
                    if (key == "rank") rank = cur.parse_int();
                    else if (key == "token_bytes") {
                        if (cur.peek() != '"') cur.fail("token_bytes must be a string");
                        cur.parse_string(b64);
                    } else cur.skip_value();
                });
                if (rank < 0 || !base64_decode(b64, bytes) || bytes.empty())
                    cur.fail("each entry needs a rank >= 0 and base64 token_bytes");
                out.emplace_back(std::move(bytes), rank);
            } while (cur.consume(','));
            cur.expect(']');
        }
        if (!cur.at_end()) cur.fail("extra data after the JSON list");
    } catch (const DataError& e) {
        GPT_THROW(DataError, "--tokenizer-model '", path, "': ", e.what(), " (expected Megatron's JSON list of {rank, token_bytes, token_str})");
    }
    return out;
}

class TikEncoder : public TextEncoder {
public:
    explicit TikEncoder(const TikTokenizer& tok) : tok_(tok), cache_(1u << 20) {}
    void encode(std::string_view text, std::vector<std::int32_t>& out) override {
        for_each_tik_piece(text, tok_.pattern(), [&](std::size_t b, std::size_t e) {
            const std::string_view piece = text.substr(b, e - b);
            if (cache_.lookup(piece, out)) return;
            scratch_.clear();
            tok_.encode_piece(piece, scratch_);
            out.insert(out.end(), scratch_.begin(), scratch_.end());
            cache_.insert(piece, scratch_);
        });
    }

private:
    const TikTokenizer& tok_;
    PieceCache cache_;
    std::vector<std::int32_t> scratch_;
};

}  // namespace

TikPattern TikTokenizer::parse_pattern(const std::string& name) {
    if (name == "v1") return TikPattern::V1;
    if (name == "v2") return TikPattern::V2;
    if (name == "cl100k_base") return TikPattern::Cl100k;
    if (name == "o200k_base") return TikPattern::O200k;
    GPT_THROW(UsageError, "--tiktoken-pattern ", name.empty() ? "is required with --tokenizer-type TikTokenizer" : "'" + name + "' is unknown",
              ": v1 or v2 (Megatron's patterns), cl100k_base (also Llama 3's) or o200k_base");
}

TikTokenizer TikTokenizer::load(const TikTokenizerOptions& o) {
    TikTokenizer t;
    t.pattern_ = parse_pattern(o.pattern);
    if (o.path.empty()) GPT_THROW(UsageError, "--tokenizer-type TikTokenizer needs --tokenizer-model (a tiktoken rank file)");

    // Special tokens, as Megatron builds them: the list (default <unk> <s> </s>), unique and
    // holding those three, then <SPECIAL_i> fillers up to num_special_tokens.
    t.special_ = o.special_tokens.empty() ? std::vector<std::string>{"<unk>", "<s>", "</s>"} : o.special_tokens;
    for (const char* required : {"<unk>", "<s>", "</s>"})
        if (std::find(t.special_.begin(), t.special_.end(), required) == t.special_.end())
            GPT_THROW(UsageError, "--tiktoken-special-tokens must include <unk> <s> </s>; ", required, " is missing");
    for (std::size_t i = 0; i < t.special_.size(); ++i)
        for (std::size_t j = i + 1; j < t.special_.size(); ++j)
            if (t.special_[i] == t.special_[j]) GPT_THROW(UsageError, "--tiktoken-special-tokens lists ", t.special_[i], " twice");
    if (o.num_special_tokens < static_cast<int>(t.special_.size()))
        GPT_THROW(UsageError, "--tiktoken-num-special-tokens ", o.num_special_tokens, " is fewer than the ",
                  t.special_.size(), " special tokens");
    for (int i = static_cast<int>(t.special_.size()); i < o.num_special_tokens; ++i)
        t.special_.push_back("<SPECIAL_" + std::to_string(i) + ">");
    t.num_special_ = o.num_special_tokens;
    t.eod_ = static_cast<std::int32_t>(std::find(t.special_.begin(), t.special_.end(), "</s>") - t.special_.begin());

    const std::string text = read_file(o.path);
    std::size_t first = text.find_first_not_of(" \t\r\n");
    auto entries = first != std::string::npos && text[first] == '[' ? parse_megatron_json(o.path, text)
                                                                     : parse_tiktoken_text(o.path, text);
    const std::size_t n = entries.size();
    if (n < 256) GPT_THROW(DataError, "--tokenizer-model '", o.path, "' has ", n, " ranks; a byte-level BPE has at least 256");
    std::vector<std::string> by_rank(n);
    std::vector<bool> seen(n, false);
    for (auto& [bytes, rank] : entries) {
        if (rank >= static_cast<std::int64_t>(n) || seen[static_cast<std::size_t>(rank)])
            GPT_THROW(DataError, "--tokenizer-model '", o.path, "': ranks must be 0..", n - 1, " each used once; got rank ", rank, " again or out of range");
        seen[static_cast<std::size_t>(rank)] = true;
        by_rank[static_cast<std::size_t>(rank)] = std::move(bytes);
    }
    std::size_t keep = n;
    if (o.vocab_size > 0) {
        // Megatron: inner vocab = vocab_size - num_special_tokens, the ranks cut to it; the
        // file must hold at least that many.
        if (o.vocab_size <= o.num_special_tokens)
            GPT_THROW(UsageError, "--vocab-size ", o.vocab_size, " must exceed --tiktoken-num-special-tokens ", o.num_special_tokens);
        keep = static_cast<std::size_t>(o.vocab_size - o.num_special_tokens);
        if (keep > n)
            GPT_THROW(UsageError, "--vocab-size ", o.vocab_size, " needs ", keep, " ranks after ", o.num_special_tokens,
                      " special tokens, but --tokenizer-model '", o.path, "' has ", n, " (omit --vocab-size to take ", n + o.num_special_tokens, ")");
        if (keep < 256) GPT_THROW(UsageError, "--vocab-size ", o.vocab_size, " leaves fewer than 256 ranks (every byte needs one)");
        by_rank.resize(keep);
    }
    t.rank_bytes_ = std::move(by_rank);
    t.rank_of_.reserve(keep * 2);
    for (std::size_t r = 0; r < keep; ++r) {
        if (!t.rank_of_.emplace(t.rank_bytes_[r], static_cast<std::int32_t>(r)).second)
            GPT_THROW(DataError, "--tokenizer-model '", o.path, "': token of rank ", r, " repeats an earlier token");
    }
    for (int b = 0; b < 256; ++b) {
        const char c = static_cast<char>(b);
        auto it = t.rank_of_.find(std::string_view(&c, 1));
        if (it == t.rank_of_.end())
            GPT_THROW(DataError, "--tokenizer-model '", o.path, "': no token for byte ", b, "; not a byte-level BPE rank file");
        t.merges_.set_byte_token(b, it->second);
    }
    // A pair merges when its concatenation is a token: every split of every token into two
    // tokens is a pair, ranked by the token it makes (tiktoken's byte-pair merge).
    std::size_t pairs = 0;
    for (const auto& tok : t.rank_bytes_) pairs += tok.size() - 1;
    t.merges_.reset(pairs, BpeRanks::Rule::Leftmost);
    for (std::size_t r = 0; r < keep; ++r) {
        const std::string_view tok = t.rank_bytes_[r];
        for (std::size_t p = 1; p < tok.size(); ++p) {
            auto l = t.rank_of_.find(tok.substr(0, p));
            if (l == t.rank_of_.end()) continue;
            auto rr = t.rank_of_.find(tok.substr(p));
            if (rr == t.rank_of_.end()) continue;
            t.merges_.add(l->second, rr->second, static_cast<std::int32_t>(r), static_cast<std::int32_t>(r));
        }
    }
    return t;
}

void TikTokenizer::encode_piece(std::string_view piece, std::vector<std::int32_t>& out) const {
    const std::size_t before = out.size();
    if (auto it = rank_of_.find(piece); it != rank_of_.end()) out.push_back(it->second);
    else merges_.bpe(piece, out);
    for (std::size_t i = before; i < out.size(); ++i) out[i] += num_special_;
}

std::vector<std::int32_t> TikTokenizer::encode(std::string_view text) const {
    std::vector<std::int32_t> out;
    for_each_tik_piece(text, pattern_, [&](std::size_t b, std::size_t e) { encode_piece(text.substr(b, e - b), out); });
    return out;
}

std::unique_ptr<TextEncoder> TikTokenizer::make_encoder() const { return std::make_unique<TikEncoder>(*this); }

std::string TikTokenizer::decode(std::span<const std::int32_t> ids) const {
    std::string out;
    for (std::int32_t id : ids) {
        if (id < 0 || id >= vocab_size()) GPT_THROW(DataError, "token id ", id, " is outside the vocabulary [0, ", vocab_size(), ")");
        if (id < num_special_) out += special_[static_cast<std::size_t>(id)];
        else out += rank_bytes_[static_cast<std::size_t>(id - num_special_)];
    }
    return out;
}

}  // namespace gpt::data
