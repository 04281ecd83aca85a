#include "data/index_cache.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/errors.hpp"

namespace gpt::data {

namespace {

constexpr char kMagic[8] = {'G', 'P', 'T', 'I', 'D', 'X', '0', '3'};
constexpr std::size_t kHeader = 64;
// The header's fields after the magic, in order.
enum Field { kDescriptionBytes, kEpochs, kDocuments, kSamples, kShuffles, kShuffleBytes, kFields };

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

IndexCacheWriter::IndexCacheWriter(const std::string& path, const std::string& description,
                                   std::int64_t num_epochs, std::int64_t documents, std::int64_t samples,
                                   std::int64_t shuffles, bool wide)
    : path_(path), description_(description), counts_{documents, samples, shuffles}, widths_{4, 4, wide ? 8u : 4u} {
    GPT_ASSERT(wide || !needs_wide_shuffle(shuffles), shuffles, " samples in a 32-bit shuffle index");
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    if (ec) GPT_THROW(IoError, "cannot create the index cache folder for '", path, "': ", ec.message());
    char header[kHeader] = {};
    std::memcpy(header, kMagic, 8);
    const std::uint64_t fields[kFields] = {description.size(),
                                           static_cast<std::uint64_t>(num_epochs),
                                           static_cast<std::uint64_t>(documents),
                                           static_cast<std::uint64_t>(samples),
                                           static_cast<std::uint64_t>(shuffles),
                                           widths_[2]};
    std::memcpy(header + 8, fields, sizeof fields);
    file_ = std::make_unique<DurableFileWriter>(temp_name_for(path));
    file_->append(header, kHeader);
    offset_ = kHeader;
}

void IndexCacheWriter::append(const std::vector<std::int32_t>& array) { append(array.data(), array.size(), 4); }
void IndexCacheWriter::append(const std::vector<std::int64_t>& array) { append(array.data(), array.size(), 8); }
void IndexCacheWriter::append(const std::int32_t* piece, std::size_t count) { append(piece, count, 4); }

void IndexCacheWriter::append(const void* data, std::size_t count, std::size_t bytes) {
    GPT_ASSERT(appended_ < 3 && filled_ + static_cast<std::int64_t>(count) <= counts_[appended_] &&
                   bytes == widths_[appended_],
               "index array ", appended_, ": ", count, " more entries of ", bytes, " bytes after ", filled_, " for ",
               path_);
    if (appended_ == 2 && filled_ == 0 && offset_ % 8 != 0) {  // the shuffle index starts 8-aligned
        const char pad[8] = {};
        file_->append(pad, 8 - offset_ % 8);
        offset_ += 8 - offset_ % 8;
    }
    file_->append(data, bytes * count);
    offset_ += bytes * count;
    filled_ += static_cast<std::int64_t>(count);
    if (filled_ == counts_[appended_]) {
        ++appended_;
        filled_ = 0;
    }
}

void IndexCacheWriter::commit() { finish()->commit(path_); }

std::unique_ptr<DurableFileWriter> IndexCacheWriter::finish() {
    GPT_ASSERT(file_ && appended_ == 3, appended_, " of 3 index arrays written to ", path_);
    file_->append(description_.data(), description_.size());
    return std::move(file_);
}

MappedIndexCache::MappedIndexCache(const std::string& path, const std::string& description) : file_(path) {
    auto bad = [&](const auto&... what) { GPT_THROW(DataError, "index cache file '", path, "' is ", what...); };
    const std::size_t n = file_.size();
    const unsigned char* d = file_.data();
    if (n < kHeader || std::memcmp(d, kMagic, 8) != 0)
        bad("not an index cache of this version (", n, " bytes, no GPTIDX03 header)");
    const std::uint64_t nd = field(d, kDocuments), ns = field(d, kSamples), nsh = field(d, kShuffles);
    const std::uint64_t width = field(d, kShuffleBytes);
    if (width != 4 && width != 8) bad("corrupt (shuffle entries of ", width, " bytes)");
    for (std::uint64_t count : {nd, ns, nsh})
        if (count > n / 4) bad("truncated or corrupt (", n, " bytes for ", count, " entries)");
    // Bounded above, so none of this overflows.
    const std::uint64_t shuffle_at = (kHeader + 4 * (nd + ns) + 7) / 8 * 8;
    const std::uint64_t text_at = shuffle_at + width * nsh;
    const std::uint64_t text = field(d, kDescriptionBytes);
    if (text > n || text_at + text != n)
        bad("truncated or corrupt (", n, " bytes; its header describes ", text_at + text, ")");
    const char* stored = reinterpret_cast<const char*>(d + text_at);
    if (text != description.size() || std::memcmp(stored, description.data(), text) != 0) {
        std::string shown(stored, std::min<std::size_t>(text, 300));
        for (char& c : shown)
            if (c == '\n') c = ';';
        bad("foreign: it was built for other dataset parameters (its description: \"", shown, "\")");
    }
    num_epochs_ = static_cast<std::int64_t>(field(d, kEpochs));
    // mmap returns page-aligned memory, the header is 64 bytes and the shuffle index starts
    // 8-aligned, so every array is aligned for its type.
    document_ = IndexView(d + kHeader, static_cast<std::int64_t>(nd), false);
    sample_ = IndexView(d + kHeader + 4 * nd, static_cast<std::int64_t>(ns), false);
    shuffle_ = IndexView(d + shuffle_at, static_cast<std::int64_t>(nsh), width == 8);
}

}  // namespace gpt::data
