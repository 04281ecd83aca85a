#include "text/gpt2_tokenizer.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "core/errors.hpp"
#include "text/json.hpp"
#include "text/text_lines.hpp"
#include "text/utf8.hpp"

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
            t.merges_.set_byte_token(b, it->second);
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
        t.merges_.reset(std::max(ids.size(), lines), BpeRanks::Rule::AllOccurrences);
        TextLines reader(text);
        std::string_view line;
        std::int32_t rank = 0;
        while (reader.next(line)) {
            const std::size_t line_no = reader.line_no();
            if (line_no == 1 && line.starts_with("#version")) continue;
            if (line.empty()) {
                if (reader.at_end()) break;  // the file's final newline
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
            t.merges_.add(l->second, r->second, rank, m->second);
            ++rank;
        }
        if (rank == 0) GPT_THROW(DataError, "merge file '", merge_file, "' has no merges");
    }
    return t;
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
