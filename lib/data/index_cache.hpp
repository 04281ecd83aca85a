// On-disk cache of one GPT dataset split's index arrays, one file per split so a reader never
// sees the arrays of two different builds side by side:
//   header (64 B): "GPTIDX03" | u64 description bytes | u64 epochs | u64 document-index count |
//                  u64 sample-index count | u64 shuffle-index count | u64 shuffle entry bytes
//                  (4 or 8) | 8 zero bytes
//   i32 document_index[] | i32 sample_index[] | 0-4 zero bytes to an 8-byte boundary |
//   i32 or i64 shuffle_index[] | description (text)
// The document and sample indices always fit 32 bits (the builder refuses a document index of
// 2^31 entries or more, and offsets lie inside one int32-long sequence); the shuffle index is
// 64-bit only for a split of 2^31 samples or more. As Megatron stores them: half the bytes of
// 64-bit arrays to write, fsync and map at every cold start.
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

#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/mapped_file.hpp"

namespace gpt::data {

// 16 hex digits of the 64-bit FNV-1a hash of text.
std::string description_hash(const std::string& text);

// Writes one cache file atomically and durably (see above), streaming: the header first (the
// plan knows every count before the arrays exist), then each array as soon as it is built, so
// the disk writes one while the next is computed and a builder holds only the arrays it still
// needs. Creates the folder as needed. IoError naming the path on any failure (full disk,
// read-only folder); destroyed before commit(), it leaves no file behind.
class IndexCacheWriter {
public:
    // wide: 64-bit shuffle entries (needs_wide_shuffle; a test may ask for them on any size).
    IndexCacheWriter(const std::string& path, const std::string& description, std::int64_t num_epochs,
                     std::int64_t documents, std::int64_t samples, std::int64_t shuffles, bool wide);
    // Whether a split of `samples` samples needs a 64-bit shuffle index (see above).
    static bool needs_wide_shuffle(std::int64_t samples) { return samples > INT32_MAX; }
    // The document, sample and shuffle index, in this order, each of the count and type given
    // above.
    void append(const std::vector<std::int32_t>& array);
    void append(const std::vector<std::int64_t>& array);
    // A piece of the current 32-bit array: an array may arrive in several (the sample index is
    // written as it is walked, so the disk has less left to write at the fsync).
    void append(const std::int32_t* piece, std::size_t count);
    void commit();  // the description, fsync, rename into place
    // The description written, the file for a later commit to path() (a CommitQueue's).
    std::unique_ptr<DurableFileWriter> finish();
    const std::string& path() const { return path_; }

private:
    void append(const void* data, std::size_t count, std::size_t bytes);
    std::string path_, description_;
    std::int64_t counts_[3];
    std::size_t widths_[3];
    int appended_ = 0;             // arrays complete
    std::int64_t filled_ = 0;      // entries of the current one
    std::uint64_t offset_ = 0;
    std::unique_ptr<DurableFileWriter> file_;
};

// A read-only view of one array inside a mapped cache file, of 32- or 64-bit entries.
class IndexView {
public:
    IndexView() = default;
    IndexView(const void* data, std::int64_t count, bool wide) : data_(data), count_(count), wide_(wide) {}
    std::int64_t size() const { return count_; }
    std::int64_t operator[](std::int64_t i) const {
        return wide_ ? static_cast<const std::int64_t*>(data_)[i] : static_cast<const std::int32_t*>(data_)[i];
    }

private:
    const void* data_ = nullptr;
    std::int64_t count_ = 0;
    bool wide_ = false;
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
