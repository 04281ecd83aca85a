#include "data/index_cache.hpp"

#include <cstring>
#include <filesystem>

#include "core/errors.hpp"

namespace gpt::data {

namespace {
constexpr char kMagic[8] = {'G', 'P', 'T', 'I', 'D', 'X', '0', '1'};
constexpr std::size_t kHeader = 16;
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

void write_index_array(const std::string& path, const std::vector<std::int64_t>& values) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    if (ec) GPT_THROW(IoError, "cannot create the index cache folder for '", path, "': ", ec.message());
    std::vector<char> bytes(kHeader + values.size() * 8);
    std::memcpy(bytes.data(), kMagic, 8);
    const std::uint64_t n = values.size();
    std::memcpy(bytes.data() + 8, &n, 8);
    if (!values.empty()) std::memcpy(bytes.data() + kHeader, values.data(), values.size() * 8);
    write_file_atomically(path, bytes.data(), bytes.size());
}

MappedIndexArray::MappedIndexArray(const std::string& path) : file_(path) {
    const std::size_t n = file_.size();
    if (n < kHeader || std::memcmp(file_.data(), kMagic, 8) != 0)
        GPT_THROW(DataError, "index cache file '", path, "' is corrupt (bad header); delete it to rebuild");
    std::uint64_t count;
    std::memcpy(&count, file_.data() + 8, 8);
    if (count > n || kHeader + count * 8 != n)
        GPT_THROW(DataError, "index cache file '", path, "' is truncated or corrupt (", n, " bytes for ", count,
                  " entries); delete it to rebuild");
    count_ = static_cast<std::int64_t>(count);
    // mmap returns page-aligned memory and the header is 16 bytes, so the array is aligned.
    data_ = reinterpret_cast<const std::int64_t*>(file_.data() + kHeader);
}

}  // namespace gpt::data
