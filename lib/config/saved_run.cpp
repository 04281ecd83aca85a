#include "config/saved_run.hpp"

#include <charconv>
#include <sstream>
#include <stdexcept>

#include "config/options.hpp"
#include "config/saved_run_value.hpp"
#include "core/errors.hpp"

namespace gpt {

namespace {

constexpr const char* kPaddedVocab = "padded_vocab_size";

// How the arguments table printed a double (std::ostream's 6 significant digits).
std::string table_text(double v) {
    std::ostringstream os;
    os << v;
    return os.str();
}

[[noreturn]] void bad_line(const std::string& file, const std::string& key, const std::string& what) {
    GPT_THROW(DataError, "checkpoint ", file, ": attribute ", kSavedRunAttribute, ", key '", key, "': ", what);
}

int read_version(const std::string& line, const std::string& file) {
    int v = 0;
    const char* end = line.data() + line.size();
    const bool ok = line.rfind("version ", 0) == 0 && std::from_chars(line.data() + 8, end, v).ptr == end;
    GPT_REQUIRE(ok, DataError, "checkpoint ", file, ": attribute ", kSavedRunAttribute,
                " does not start with its format version (got '", line, "')");
    GPT_REQUIRE(v == kSavedRunVersion, DataError, "checkpoint ", file, ": attribute ", kSavedRunAttribute,
                " has format version ", v, "; this build reads version ", kSavedRunVersion,
                ". HINT: load it with the build that saved it (or a newer one)");
    return v;
}

}  // namespace

const OptionField* find_option_field(std::string_view key) {
    for (const OptionField& f : option_fields())
        if (f.key == key) return &f;
    return nullptr;
}

bool SavedRun::same(const OptionValue& stored, const OptionValue& other) const {
    if (version == 0 && std::holds_alternative<double>(stored) && std::holds_alternative<double>(other))
        return table_text(std::get<double>(stored)) == table_text(std::get<double>(other));
    return stored == other;
}

std::string encode_saved_run(const Config& cfg) {
    std::ostringstream os;
    os << "version " << kSavedRunVersion << "\n";
    for (const OptionField& f : option_fields()) {
        const OptionValue v = f.get(cfg);
        os << f.key << ' ' << saved_run_value::type_name(v) << ' ' << saved_run_value::encode(v) << '\n';
    }
    const std::int64_t padded = cfg.model.vocab_size > 0 ? cfg.padded_vocab_size() : 0;
    os << kPaddedVocab << " int " << padded << '\n';
    return os.str();
}

SavedRun decode_saved_run(const std::string& text, const std::string& file) {
    SavedRun out;
    out.file = file;
    std::istringstream in(text);
    std::string line;
    std::getline(in, line);
    out.version = read_version(line, file);
    std::set<std::string> seen;
    while (std::getline(in, line)) {
        const std::size_t k = line.find(' '), t = k == std::string::npos ? k : line.find(' ', k + 1);
        const std::string key = line.substr(0, k);
        if (t == std::string::npos) bad_line(file, key, "the line is not 'key type value'");
        if (!seen.insert(key).second) bad_line(file, key, "stored twice");
        const std::string type = line.substr(k + 1, t - k - 1);
        OptionValue v;
        try {
            v = saved_run_value::decode(type, std::string_view(line).substr(t + 1));
        } catch (const std::invalid_argument& e) {
            bad_line(file, key, "'" + line.substr(t + 1) + "' is no " + type + " value (" + e.what() + ")");
        }
        if (key == kPaddedVocab) {
            if (!std::holds_alternative<std::int64_t>(v)) bad_line(file, key, "stored as " + type + ", not int");
            out.padded_vocab_size = std::get<std::int64_t>(v);
            out.keys.insert(key);
            continue;
        }
        const OptionField* f = find_option_field(key);
        if (!f) continue;  // a flag of a newer build: nothing of this build's run depends on it
        const char* want = saved_run_value::type_name(f->get(Config{}));
        if (type != want) bad_line(file, key, "stored as " + type + " but this build's flag takes " + want);
        try {
            f->set(out.config, v);
        } catch (const std::exception& e) {  // UsageError (an enum spelling), std::out_of_range
            bad_line(file, key, e.what());
        }
        out.keys.insert(key);
    }
    return out;
}

}  // namespace gpt
