// The legacy reader: checkpoints saved before run_config hold only the arguments table
// (format_arguments' text), read here into the same SavedRun as the typed data. Nothing
// else parses the table.
#include <charconv>
#include <map>
#include <sstream>
#include <stdexcept>

#include "config/options.hpp"
#include "config/saved_run.hpp"
#include "core/errors.hpp"

namespace gpt {

namespace {

// "  key ........ value" lines between the table's header and footer.
std::map<std::string, std::string> table_rows(const std::string& text) {
    std::map<std::string, std::string> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        const std::size_t k0 = line.find_first_not_of(' ');
        if (k0 == std::string::npos || line.compare(k0, 2, "--") == 0) continue;
        const std::size_t k1 = line.find(' ', k0);
        if (k1 == std::string::npos) continue;
        const std::size_t dots = line.find_first_not_of(' ', k1);
        if (dots == std::string::npos || line[dots] != '.') continue;
        const std::size_t v0 = line.find_first_not_of('.', dots);
        if (v0 == std::string::npos || line[v0] != ' ') continue;
        out[line.substr(k0, k1 - k0)] = line.substr(v0 + 1);
    }
    return out;
}

bool is_false(const std::string& v) { return v == "False" || v == "false" || v == "0"; }
bool is_true(const std::string& v) { return v == "True" || v == "true" || v == "1"; }

template <typename T>
T number(std::string_view t) {
    T v{};
    const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    if (r.ec != std::errc() || r.ptr != t.data() + t.size()) throw std::invalid_argument("not a number");
    return v;
}

// "[a, b]" (the brackets taken off) split at ", ".
std::vector<std::string> list_items(const std::string& t) {
    if (t.size() < 2 || t.front() != '[' || t.back() != ']') throw std::invalid_argument("not a list");
    std::vector<std::string> out;
    const std::string body = t.substr(1, t.size() - 2);
    for (std::size_t i = 0; !body.empty();) {
        const std::size_t j = body.find(", ", i);
        out.push_back(body.substr(i, j - i));
        if (j == std::string::npos) break;
        i = j + 2;
    }
    return out;
}

// The row's text as the type `like` holds, undoing the table's printing (options.cpp to_text).
OptionValue parse_row(const OptionValue& like, const std::string& t) {
    switch (like.index()) {
        case 0:
            if (is_true(t) || is_false(t)) return is_true(t);
            throw std::invalid_argument("not True or False");
        case 1: return number<std::int64_t>(t);
        case 2: return number<std::uint64_t>(t);
        case 3: return number<double>(t);
        case 4: return t == "None" ? std::string() : t;
        case 5: {
            std::vector<std::int64_t> v;
            if (t == "None") return v;  // an empty list (--rampup-batch-size not given)
            for (const std::string& x : list_items(t)) v.push_back(number<std::int64_t>(x));
            return v;
        }
        default: {
            std::vector<std::string> v;
            if (t == "None") return v;
            for (std::string x : list_items(t)) {
                if (x.size() < 2 || x.front() != '\'' || x.back() != '\'') throw std::invalid_argument("not a quoted item");
                v.push_back(x.substr(1, x.size() - 2));
            }
            return v;
        }
    }
}

// Megatron's rows for architectures our model does not have, each set to its "off" value in
// any table this build can load.
constexpr const char* kForeignArchitecture[] = {"apply_residual_connection_post_layernorm"};

}  // namespace

SavedRun saved_run_from_table(const std::string& table, const std::string& file) {
    const auto rows = table_rows(table);
    SavedRun out;
    out.file = file;
    auto bad = [&](const std::string& key, const std::string& what) {
        GPT_THROW(DataError, "checkpoint ", file, ": its arguments table (attribute ", kArgumentsTableAttribute,
                  "), row '", key, "': ", what);
    };
    for (const OptionField& f : option_fields()) {
        const auto row = rows.find(f.key);
        if (row == rows.end()) continue;  // an older build's table: the flag did not exist
        // Megatron's table prints an unset number as None (kv_channels, decoupled_lr): the
        // default here, which means the same.
        if (row->second == "None" && (f.get(Config{}).index() == 1 || f.get(Config{}).index() == 3)) continue;
        try {
            f.set(out.config, parse_row(f.get(Config{}), row->second));
        } catch (const std::exception& e) {  // from_chars, a list, an enum spelling, a narrowing
            bad(f.key, "'" + row->second + "' (" + e.what() + ")");
        }
        out.keys.insert(f.key);
    }
    if (const auto p = rows.find("padded_vocab_size"); p != rows.end() && p->second != "None") {
        try {
            out.padded_vocab_size = number<std::int64_t>(p->second);
        } catch (const std::invalid_argument&) {
            bad(p->first, "'" + p->second + "' is not an integer");
        }
        out.keys.insert(p->first);
    }
    // Megatron's spellings of our flags.
    if (const auto r = rows.find("use_rotary_position_embeddings"); r != rows.end() && is_true(r->second)) {
        out.config.model.position_embedding_type = PositionEmbeddingType::Rope;
        out.keys.insert("position_embedding_type");
    }
    if (const auto r = rows.find("add_bias_linear"); r != rows.end() && is_false(r->second)) {
        out.config.model.disable_bias_linear = true;
        out.keys.insert("disable_bias_linear");
    }
    for (const char* k : kForeignArchitecture) {
        const auto r = rows.find(k);
        GPT_REQUIRE(r == rows.end() || is_false(r->second), UsageError, "checkpoint ", file, ": --", k, " is ",
                    r->second, " in its arguments table, an architecture this build's model does not implement");
    }
    const ModelConfig& m = out.config.model;
    if (const auto r = rows.find("kv_channels"); r != rows.end() && r->second != "None" && r->second != "0")
        GPT_REQUIRE(m.num_attention_heads > 0 && r->second == std::to_string(m.hidden_size / m.num_attention_heads),
                    UsageError, "checkpoint ", file, ": --kv_channels is ", r->second,
                    " in its arguments table, not hidden-size / num-attention-heads: an attention this build's "
                    "model does not implement");
    return out;
}

}  // namespace gpt
