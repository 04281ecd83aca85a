#include "hf/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "core/errors.hpp"
#include "core/fd_write.hpp"
#include "core/half.hpp"
#include "text/json.hpp"

namespace gpt::hf {

namespace {

// Hugging Face's reader refuses headers above 100 MB; so do we (a hostile length would
// otherwise make us allocate it).
constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;

std::uint64_t dtype_bytes(const std::string& dtype) {
    if (dtype == "F32") return 4;
    if (dtype == "F16" || dtype == "BF16") return 2;
    return 0;
}

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

std::vector<std::int64_t> parse_int_list(data::JsonCursor& j) {
    std::vector<std::int64_t> v;
    j.expect('[');
    if (j.consume(']')) return v;
    do v.push_back(j.parse_int());
    while (j.consume(','));
    j.expect(']');
    return v;
}

TensorEntry parse_entry(data::JsonCursor& j, const std::string& name) {
    TensorEntry e;
    bool have_dtype = false, have_shape = false, have_offsets = false;
    std::vector<std::int64_t> offsets;
    j.for_each_member([&](const std::string& key) {
        if (key == "dtype") {
            if (j.peek() != '"') j.fail("dtype of " + name + " is not a string");
            j.parse_string(e.dtype);
            have_dtype = true;
        } else if (key == "shape") {
            e.shape = parse_int_list(j);
            have_shape = true;
        } else if (key == "data_offsets") {
            offsets = parse_int_list(j);
            have_offsets = true;
        } else {
            j.skip_value();
        }
    });
    GPT_REQUIRE(have_dtype && have_shape && have_offsets, DataError, "tensor ", name,
                " lacks dtype, shape or data_offsets");
    GPT_REQUIRE(offsets.size() == 2 && offsets[0] >= 0 && offsets[1] >= offsets[0], DataError, "tensor ", name,
                " has data_offsets that are not [begin, end] with 0 <= begin <= end");
    e.begin = static_cast<std::uint64_t>(offsets[0]);
    e.end = static_cast<std::uint64_t>(offsets[1]);
    return e;
}

// Elements of `shape`, or nullopt-like UINT64_MAX when negative or overflowing.
std::uint64_t numel(const std::vector<std::int64_t>& shape) {
    std::uint64_t n = 1;
    for (std::int64_t d : shape) {
        if (d < 0) return UINT64_MAX;
        if (d != 0 && n > (UINT64_MAX / 8) / static_cast<std::uint64_t>(d)) return UINT64_MAX;
        n *= static_cast<std::uint64_t>(d);
    }
    return n;
}

}  // namespace

std::string safetensors_header(const std::vector<NamedTensor>& tensors) {
    std::ostringstream os;
    os << "{\"__metadata__\":{\"format\":\"pt\"}";
    std::uint64_t offset = 0;
    for (const NamedTensor& t : tensors) {
        GPT_REQUIRE(numel(t.shape) == t.values.size(), InternalError, "tensor ", t.name, " has ",
                    t.values.size(), " values for its shape");
        os << "," << json_string(t.name) << ":{\"dtype\":\"F32\",\"shape\":[";
        for (std::size_t i = 0; i < t.shape.size(); ++i) os << (i ? "," : "") << t.shape[i];
        const std::uint64_t bytes = t.values.size() * sizeof(float);
        os << "],\"data_offsets\":[" << offset << "," << offset + bytes << "]}";
        offset += bytes;
    }
    os << "}";
    std::string h = os.str();
    h.append((8 - h.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
    return h;
}

void write_safetensors(int fd, const std::string& path, const std::vector<NamedTensor>& tensors) {
    static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");
    const std::string h = safetensors_header(tensors);
    std::uint64_t n = h.size();
    auto put = [&](const void* p, std::size_t size) {
        const int err = write_fully(fd, p, size);
        GPT_REQUIRE(err == 0, IoError, "cannot write ", path, ": ", std::strerror(err));
    };
    put(&n, sizeof n);
    put(h.data(), h.size());
    for (const NamedTensor& t : tensors) put(t.values.data(), t.values.size() * sizeof(float));
}

SafetensorsHeader parse_safetensors_header(std::string_view prefix, std::uint64_t file_size) {
    GPT_REQUIRE(file_size >= 8 && prefix.size() >= 8, DataError, "file of ", file_size,
                " bytes is shorter than the 8-byte header length");
    SafetensorsHeader out;
    std::memcpy(&out.header_bytes, prefix.data(), 8);
    const std::uint64_t n = out.header_bytes;
    GPT_REQUIRE(n <= file_size - 8, DataError, "header length ", n, " runs past the end of the file (",
                file_size, " bytes): truncated or not a safetensors file");
    GPT_REQUIRE(n <= kMaxHeaderBytes, DataError, "header length ", n, " exceeds the 100 MB limit");
    GPT_REQUIRE(prefix.size() >= 8 + n, InternalError, "safetensors header prefix too short");
    const std::uint64_t data_bytes = file_size - 8 - n;
    data::JsonCursor j(prefix.substr(8, n));
    try {
        if (j.peek() != '{') j.fail("header is not a JSON object");
        j.for_each_member([&](const std::string& key) {
            if (key == "__metadata__") {
                j.for_each_member([&](const std::string& mk) {
                    if (j.peek() != '"') j.fail("__metadata__ value of " + mk + " is not a string");
                    j.parse_string(out.metadata[mk]);
                });
                return;
            }
            if (j.peek() != '{') j.fail("entry " + key + " is not an object");
            GPT_REQUIRE(!out.tensors.count(key), DataError, "tensor ", key, " appears twice in the header");
            out.tensors[key] = parse_entry(j, key);
        });
        GPT_REQUIRE(j.at_end(), DataError, "trailing bytes after the header's JSON object");
    } catch (const DataError& e) {
        throw DataError(std::string("bad safetensors header: ") + e.what());
    }
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    for (const auto& [name, e] : out.tensors) {
        const std::uint64_t size = dtype_bytes(e.dtype);
        GPT_REQUIRE(size != 0, DataError, "tensor ", name, " has dtype ", e.dtype,
                    ", not one of F32, F16, BF16");
        GPT_REQUIRE(e.end <= data_bytes, DataError, "tensor ", name, " ends at data offset ", e.end,
                    ", past the end of the file's ", data_bytes, " data bytes (truncated file?)");
        const std::uint64_t elems = numel(e.shape);
        GPT_REQUIRE(elems != UINT64_MAX && e.end - e.begin == elems * size, DataError, "tensor ", name,
                    " has ", e.end - e.begin, " bytes, not what its shape and dtype ", e.dtype, " need");
        ranges.emplace_back(e.begin, e.end);
    }
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i)
        GPT_REQUIRE(ranges[i].first >= ranges[i - 1].second, DataError, "tensors overlap at data offset ",
                    ranges[i].first);
    return out;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    GPT_REQUIRE(fd >= 0, IoError, "cannot open ", path, ": ", std::strerror(errno));
    struct FdCloser {
        int fd;
        ~FdCloser() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    GPT_REQUIRE(::fstat(fd, &st) == 0, IoError, "cannot stat ", path, ": ", std::strerror(errno));
    const auto size = static_cast<std::uint64_t>(st.st_size);
    // Reads [offset, offset + n) of the file into dst (a file that shrank is an IoError).
    auto read_at = [&](void* dst, std::uint64_t offset, std::uint64_t n) {
        auto* p = static_cast<char*>(dst);
        std::uint64_t got = 0;
        while (got < n) {
            const ssize_t r = ::pread(fd, p + got, n - got, static_cast<off_t>(offset + got));
            if (r < 0 && errno == EINTR) continue;
            GPT_REQUIRE(r > 0, IoError, "cannot read ", path, ": ", r == 0 ? "file shrank" : std::strerror(errno));
            got += static_cast<std::uint64_t>(r);
        }
    };
    // The header first (its length checked before anything that size is allocated), then
    // the data section straight into its buffer: the file is held in memory once.
    std::string prefix(std::min<std::uint64_t>(size, 8), '\0');
    read_at(prefix.data(), 0, prefix.size());
    try {
        if (size >= 8) {
            std::uint64_t n = 0;
            std::memcpy(&n, prefix.data(), 8);
            if (n <= size - 8 && n <= kMaxHeaderBytes) {
                prefix.resize(8 + n);
                read_at(prefix.data() + 8, 8, n);
            }
        }
        header_ = parse_safetensors_header(prefix, size);
    } catch (const DataError& e) {
        throw DataError(path + ": " + e.what());
    }
    const std::uint64_t start = 8 + header_.header_bytes;
    data_.resize(size - start);
    read_at(data_.data(), start, data_.size());
}

std::vector<float> SafetensorsFile::read(const std::string& name) const {
    const auto it = header_.tensors.find(name);
    GPT_REQUIRE(it != header_.tensors.end(), DataError, path_, ": no tensor named ", name);
    const TensorEntry& e = it->second;
    const std::byte* p = data_.data() + e.begin;
    const std::size_t n = (e.end - e.begin) / dtype_bytes(e.dtype);
    std::vector<float> out(n);
    if (e.dtype == "F32") {
        std::memcpy(out.data(), p, n * sizeof(float));
    } else {
        for (std::size_t i = 0; i < n; ++i) {
            std::uint16_t b;
            std::memcpy(&b, p + 2 * i, 2);
            out[i] = e.dtype == "F16" ? half_bits_to_float(b) : bf16_bits_to_float(b);
        }
    }
    return out;
}

}  // namespace gpt::hf
