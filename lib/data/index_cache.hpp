// On-disk cache of one GPT dataset split's index arrays, one file per split so a reader never
// sees the arrays of two different builds side by side:
//   header (64 B): "GPTIDX02" | u64 description bytes | u64 epochs | u64 document-index count |
//                  u64 sample-index count | u64 shuffle-index count | 16 zero bytes
//   i64 document_index[] | i64 sample_index[] | i64 shuffle_index[] | description (text)
// named <cache_dir>/<hash>-GPTDataset-<split>-indices.bin, where <hash> digests the
// description: every parameter the arrays depend on. The description is stored whole and
// compared on open, so a file copied or renamed from other parameters is recognised as foreign
// (a hash alone could collide).
//
// Shared caches: many ranks, nodes and jobs may use one cache folder on a shared file system.
// A builder writes to a temporary name unique across hosts (<file>.tmp.<pid>-<n>.<host>), fsyncs
// it and renames it into place, so a reader maps either no file or a whole one; two builders racing write identical bytes (the build is deterministic) and the
// last rename wins. A builder killed outright leaves only its temporary file, which the next
// builder on that host removes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/mapped_file.hpp"

namespace gpt::data {

// 16 hex digits of the 64-bit FNV-1a hash of text.
std::string description_hash(const std::string& text);

struct IndexArrays {
    std::int64_t num_epochs = 1;
    std::vector<std::int64_t> document, sample, shuffle;
};

// Writes the cache file atomically and durably (see above); creates the folder as needed.
// IoError naming the path on any failure (full disk, read-only folder).
void write_index_cache(const std::string& path, const std::string& description, const IndexArrays& arrays);

// A read-only view of one array inside a mapped cache file.
class IndexView {
public:
    IndexView() = default;
    IndexView(const std::int64_t* data, std::int64_t count) : data_(data), count_(count) {}
    std::int64_t size() const { return count_; }
    std::int64_t operator[](std::int64_t i) const { return data_[i]; }
    const std::int64_t* data() const { return data_; }

private:
    const std::int64_t* data_ = nullptr;
    std::int64_t count_ = 0;
};

// A mapped cache file whose framing was checked: the magic, the file length against the
// counts, and the stored description against `description`. Throws DataError
// "index cache file '<path>' is <what is wrong>" (IoError when it cannot be opened). The
// arrays' values are checked by their user (GptDataset::validate).
class MappedIndexCache {
public:
    MappedIndexCache() = default;
    MappedIndexCache(const std::string& path, const std::string& description);
    const std::string& path() const { return file_.path(); }
    std::int64_t num_epochs() const { return num_epochs_; }
    const IndexView& document_index() const { return document_; }
    const IndexView& sample_index() const { return sample_; }
    const IndexView& shuffle_index() const { return shuffle_; }

private:
    MappedFile file_;
    std::int64_t num_epochs_ = 0;
    IndexView document_, sample_, shuffle_;
};

}  // namespace gpt::data
