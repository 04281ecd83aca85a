// On-disk cache of the GPT dataset's index arrays: each array is one file
//   "GPTIDX01" (8 B) | u64 element count | i64 elements[count]   (8-byte aligned, mmap-able)
// named <cache_dir>/<hash>-GPTDataset-<split>-<what>_index.bin, where <hash> digests every
// parameter the arrays depend on, so changing any of them builds new files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/mapped_file.hpp"

namespace gpt::data {

// 16 hex digits of the 64-bit FNV-1a hash of text.
std::string description_hash(const std::string& text);

// Writes atomically (temporary name, then rename); creates the folder as needed.
void write_index_array(const std::string& path, const std::vector<std::int64_t>& values);

// A mapped array file; the constructor checks the header against the file length.
class MappedIndexArray {
public:
    MappedIndexArray() = default;
    explicit MappedIndexArray(const std::string& path);
    std::int64_t size() const { return count_; }
    std::int64_t operator[](std::int64_t i) const { return data_[i]; }
    const std::int64_t* data() const { return data_; }
    const std::string& path() const { return file_.path(); }

private:
    MappedFile file_;
    const std::int64_t* data_ = nullptr;
    std::int64_t count_ = 0;
};

}  // namespace gpt::data
