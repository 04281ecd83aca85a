// The safetensors file format (Hugging Face's weight files), written and read by our own code:
// an 8-byte little-endian header length N, N bytes of JSON
//   {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"format": "pt"}}
// padded with spaces to a multiple of 8, then the raw little-endian tensor bytes, offsets
// counted from the end of the header. Every check a reader needs against a damaged or
// hostile file (header past the end, offsets outside the data or overlapping, sizes that do
// not match the shape) is in parse_safetensors_header, which the fuzz target drives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gpt::hf {

// A tensor for writing: fp32 values in row-major order.
struct NamedTensor {
    std::string name;
    std::vector<std::int64_t> shape;
    std::vector<float> values;
};

// One entry of a parsed header: where its bytes lie in the data section.
struct TensorEntry {
    std::string dtype;                 // "F32", "F16" or "BF16" (others are refused)
    std::vector<std::int64_t> shape;
    std::uint64_t begin = 0, end = 0;  // byte range within the data section
};

struct SafetensorsHeader {
    std::uint64_t header_bytes = 0;    // N (the JSON text, padding included)
    std::map<std::string, TensorEntry> tensors;
    std::map<std::string, std::string> metadata;
};

// The header text of `tensors` (with "__metadata__": {"format": "pt"}), padded to 8 bytes.
std::string safetensors_header(const std::vector<NamedTensor>& tensors);

// Writes the whole file to the open descriptor `fd` (the caller owns publishing it).
// Throws IoError naming `path` when a write fails.
void write_safetensors(int fd, const std::string& path, const std::vector<NamedTensor>& tensors);

// Parses and validates the first bytes of a file of `file_size` bytes: `prefix` holds at
// least min(file_size, 8 + N) bytes. Throws DataError "<what>" naming the fault: a file
// shorter than its header, a header that is not the expected JSON, an unsupported dtype,
// offsets past the end of the file, overlapping tensors, or a byte range that does not
// hold shape x dtype size.
SafetensorsHeader parse_safetensors_header(std::string_view prefix, std::uint64_t file_size);

// A whole file read and checked: the header and each tensor converted to fp32.
class SafetensorsFile {
public:
    explicit SafetensorsFile(const std::string& path);  // IoError / DataError naming path
    const SafetensorsHeader& header() const { return header_; }
    bool has(const std::string& name) const { return header_.tensors.count(name) != 0; }
    // fp32 values of `name`; DataError when absent.
    std::vector<float> read(const std::string& name) const;
    const std::string& path() const { return path_; }

private:
    std::string path_;
    SafetensorsHeader header_;
    std::vector<std::byte> data_;  // the data section
};

}  // namespace gpt::hf
