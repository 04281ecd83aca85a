#include "ckpt/manifest.hpp"

#include <cctype>
#include <cinttypes>
#include <cstdlib>
#include <cstdio>
#include <sstream>

#include "core/errors.hpp"

namespace gpt::ckpt {

namespace {
constexpr const char* kHeader = "# gpt-pretrain checkpoint manifest v1: name<TAB>dtype<TAB>shape<TAB>checksum";
}

std::string encode_manifest(const std::vector<ManifestEntry>& entries) {
    std::ostringstream os;
    os << kHeader << '\n';
    for (const auto& e : entries) {
        os << e.name << '\t' << h5::stored_name(e.type) << '\t';
        for (std::size_t i = 0; i < e.shape.size(); ++i) os << (i ? "," : "") << e.shape[i];
        char hex[20];
        std::snprintf(hex, sizeof hex, "%016" PRIx64, e.checksum);
        os << '\t' << hex << '\n';
    }
    return os.str();
}

std::vector<ManifestEntry> parse_manifest(const std::string& text, const std::string& file) {
    std::vector<ManifestEntry> out;
    std::istringstream in(text);
    std::string line;
    int lineno = 0;
    auto bad = [&](const std::string& why) {
        GPT_THROW(DataError, "checkpoint ", file, ": manifest line ", lineno, " is damaged (", why,
                  "): '", line.substr(0, 200), "'");
    };
    while (std::getline(in, line)) {
        ++lineno;
        if (lineno == 1) {
            if (line != kHeader) bad("unknown manifest header");
            continue;
        }
        if (line.empty()) continue;
        std::vector<std::string> f;
        std::size_t pos = 0;
        while (true) {
            auto tab = line.find('\t', pos);
            f.push_back(line.substr(pos, tab - pos));
            if (tab == std::string::npos) break;
            pos = tab + 1;
        }
        if (f.size() != 4) bad("expected 4 tab-separated fields");
        ManifestEntry e;
        e.name = f[0];
        if (!h5::parse_stored(f[1], e.type)) bad("unknown dtype '" + f[1] + "'");
        std::istringstream dims(f[2]);
        std::string d;
        while (std::getline(dims, d, ',')) {
            char* end = nullptr;
            long long v = std::strtoll(d.c_str(), &end, 10);
            if (d.empty() || *end != '\0' || v < 0) bad("bad shape '" + f[2] + "'");
            e.shape.push_back(v);
        }
        if (e.shape.empty()) bad("empty shape");
        char* end = nullptr;
        e.checksum = std::strtoull(f[3].c_str(), &end, 16);
        if (f[3].size() != 16 || *end != '\0') bad("bad checksum '" + f[3] + "'");
        out.push_back(std::move(e));
    }
    if (lineno == 0) GPT_THROW(DataError, "checkpoint ", file, ": the manifest is empty");
    return out;
}

void check_tensor_name(const std::string& name) {
    auto fail = [&](const char* why) {
        GPT_THROW(InternalError, "invalid checkpoint tensor name '", name, "': ", why);
    };
    if (name.empty()) fail("empty");
    std::size_t start = 0;
    while (start <= name.size()) {
        auto slash = name.find('/', start);
        std::string part = name.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
        if (part.empty()) fail("empty path component (leading, trailing or double '/')");
        if (part == "." || part == "..") fail("'.' and '..' are not names");
        for (char c : part)
            if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'))
                fail("only letters, digits, '_', '.', '-' and '/' are allowed");
        if (start == 0 && part == kReservedGroup) fail("'_checkpoint/' is reserved for the format's own data");
        if (slash == std::string::npos) break;
        start = slash + 1;
    }
}

}  // namespace gpt::ckpt
