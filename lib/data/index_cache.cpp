#include "data/index_cache.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/errors.hpp"

namespace gpt::data {

namespace {

constexpr char kMagic[8] = {'G', 'P', 'T', 'I', 'D', 'X', '0', '2'};
constexpr std::size_t kHeader = 64;
// The header's fields after the magic, in order.
enum Field { kDescriptionBytes, kEpochs, kDocuments, kSamples, kShuffles, kFields };

std::uint64_t field(const unsigned char* header, Field f) {
    std::uint64_t v;
    std::memcpy(&v, header + 8 + 8 * f, 8);
    return v;
}

}  // namespace

std::string description_hash(const std::string& text) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : text) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

void write_index_cache(const std::string& path, const std::string& description, const IndexArrays& a) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    if (ec) GPT_THROW(IoError, "cannot create the index cache folder for '", path, "': ", ec.message());
    char header[kHeader] = {};
    std::memcpy(header, kMagic, 8);
    const std::uint64_t fields[kFields] = {description.size(), static_cast<std::uint64_t>(a.num_epochs),
                                           a.document.size(), a.sample.size(), a.shuffle.size()};
    std::memcpy(header + 8, fields, sizeof fields);
    // Written piece by piece from the arrays: no second copy of tens of megabytes.
    write_file_atomically(path, {{header, kHeader},
                                 {a.document.data(), 8 * a.document.size()},
                                 {a.sample.data(), 8 * a.sample.size()},
                                 {a.shuffle.data(), 8 * a.shuffle.size()},
                                 {description.data(), description.size()}});
}

MappedIndexCache::MappedIndexCache(const std::string& path, const std::string& description) : file_(path) {
    auto bad = [&](const auto&... what) { GPT_THROW(DataError, "index cache file '", path, "' is ", what...); };
    const std::size_t n = file_.size();
    const unsigned char* d = file_.data();
    if (n < kHeader || std::memcmp(d, kMagic, 8) != 0)
        bad("not an index cache of this version (", n, " bytes, no GPTIDX02 header)");
    std::uint64_t words = 0;
    for (Field f : {kDocuments, kSamples, kShuffles}) {
        if (field(d, f) > n / 8) bad("truncated or corrupt (", n, " bytes for ", field(d, f), " entries)");
        words += field(d, f);
    }
    const std::uint64_t text = field(d, kDescriptionBytes);
    if (text > n || kHeader + 8 * words + text != n)
        bad("truncated or corrupt (", n, " bytes; its header describes ", kHeader + 8 * words + text, ")");
    const char* stored = reinterpret_cast<const char*>(d + kHeader + 8 * words);
    if (text != description.size() || std::memcmp(stored, description.data(), text) != 0) {
        std::string shown(stored, std::min<std::size_t>(text, 300));
        for (char& c : shown)
            if (c == '\n') c = ';';
        bad("foreign: it was built for other dataset parameters (its description: \"", shown, "\")");
    }
    num_epochs_ = static_cast<std::int64_t>(field(d, kEpochs));
    // mmap returns page-aligned memory and the header is 64 bytes, so the arrays are aligned.
    const auto* a = reinterpret_cast<const std::int64_t*>(d + kHeader);
    const auto nd = static_cast<std::int64_t>(field(d, kDocuments));
    const auto ns = static_cast<std::int64_t>(field(d, kSamples));
    document_ = IndexView(a, nd);
    sample_ = IndexView(a + nd, ns);
    shuffle_ = IndexView(a + nd + ns, static_cast<std::int64_t>(field(d, kShuffles)));
}

}  // namespace gpt::data
