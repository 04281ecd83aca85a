// Megatron's indexed dataset (MMapIndexedDataset): <prefix>.bin holds token ids back to back,
// <prefix>.idx describes them:
//   magic "MMIDIDX\0\0" (9 B) | u64 version = 1 | u8 dtype code | u64 S | u64 D
//   | i32 sequence_lengths[S] | i64 sequence_byte_offsets[S] | i64 document_indices[D]
// little-endian, no padding (arrays are unaligned: read them with memcpy). document_indices
// starts at 0 and holds each document's end, counted in sequences, so D = documents + 1.
#pragma once

#include <cstdint>
#include <cstring>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "data/mapped_file.hpp"

namespace gpt::data {

// Megatron's DType codes in the .idx header.
enum class TokenDType : std::uint8_t { U8 = 1, I8 = 2, I16 = 3, I32 = 4, I64 = 5, F64 = 6, F32 = 7, U16 = 8 };

std::size_t token_dtype_size(TokenDType t);
const char* token_dtype_name(TokenDType t);
// Megatron's DType.optimal_dtype: uint16 when the unpadded vocab fits below 65500, else int32.
TokenDType best_fitting_dtype(std::int64_t vocab_size);

inline std::string idx_path(const std::string& prefix) { return prefix + ".idx"; }
inline std::string bin_path(const std::string& prefix) { return prefix + ".bin"; }

// Writes <prefix>.bin/.idx. Both are written under temporary names and renamed into place by
// finalize() (the .idx last), so a crash or a write error never leaves a valid-looking .idx
// beside an incomplete .bin. Destroying an unfinalised writer removes its temporary files.
class IndexedDatasetWriter {
public:
    IndexedDatasetWriter(std::string prefix, TokenDType dtype);
    ~IndexedDatasetWriter();
    IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
    IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

    // Appends one sequence; ids must fit the dtype (DataError otherwise).
    void add_sequence(std::span<const std::int32_t> ids);
    // Closes the current document (possibly empty: then only its index repeats).
    void end_document();
    // Appends every sequence and document of an existing dataset (merge). Same dtype required.
    void append_dataset(const std::string& prefix);
    void finalize();

    std::int64_t num_sequences() const { return static_cast<std::int64_t>(lengths_.size()); }
    std::int64_t num_documents() const { return static_cast<std::int64_t>(doc_indices_.size()) - 1; }

private:
    void write_bytes(const void* data, std::size_t n);
    void flush_buffer();

    std::string prefix_, bin_tmp_, idx_tmp_;
    TokenDType dtype_;
    std::FILE* bin_ = nullptr;
    std::vector<char> buffer_;
    std::vector<std::int32_t> lengths_;
    std::vector<std::int64_t> doc_indices_{0};
    std::int64_t bin_bytes_ = 0;
    bool finalized_ = false;
};

// Read-only memory-mapped view of <prefix>.bin/.idx. The constructor validates the header and
// every size and offset against the file lengths; any inconsistency is a DataError naming the
// file and the problem, so later reads can never go out of bounds.
class IndexedDataset {
public:
    explicit IndexedDataset(const std::string& prefix);
    IndexedDataset(const IndexedDataset&) = delete;
    IndexedDataset& operator=(const IndexedDataset&) = delete;

    const std::string& prefix() const { return prefix_; }
    TokenDType dtype() const { return dtype_; }
    std::int64_t num_sequences() const { return num_sequences_; }
    std::int64_t num_documents() const { return num_doc_indices_ - 1; }

    // Inline: start-up reads every length several times (the .idx's lengths sit at byte 34,
    // unaligned, hence the memcpy, which compiles to one load).
    std::int32_t sequence_length(std::int64_t i) const {
        GPT_ASSERT(i >= 0 && i < num_sequences_, "sequence ", i, " of ", num_sequences_);
        std::int32_t v;
        std::memcpy(&v, lengths_ + i * 4, 4);
        return v;
    }
    // Tokens in sequences [first, last), from two byte offsets (the constructor checked that
    // the offsets follow the lengths): no pass over the lengths.
    std::int64_t tokens_in(std::int64_t first, std::int64_t last) const;
    // A hint for a scan that reads lengths in random order (a cache miss each otherwise).
    void prefetch_sequence_length(std::int64_t i) const { __builtin_prefetch(lengths_ + i * 4); }
    std::int64_t sequence_offset(std::int64_t i) const;  // in bytes
    std::int64_t document_index(std::int64_t i) const;   // i in [0, num_documents()]
    // Copies tokens [offset, offset + count) of sequence seq into out as int32.
    void read(std::int64_t seq, std::int64_t offset, std::int64_t count, std::int32_t* out) const;
    std::vector<std::int32_t> sequence(std::int64_t seq) const;
    // Raw .bin bytes (for merging).
    const unsigned char* bin_data() const { return bin_.data(); }
    std::int64_t bin_size() const { return static_cast<std::int64_t>(bin_.size()); }

private:
    // The constructor's checks of the .idx arrays: DataError naming the file and the entry.
    void check_sequences(std::int64_t bin_bytes) const;
    void check_document_indices() const;

    std::string prefix_;
    TokenDType dtype_ = TokenDType::U16;
    std::int64_t num_sequences_ = 0, num_doc_indices_ = 0;
    MappedFile idx_, bin_;
    std::size_t item_size_ = 2;
    const unsigned char* lengths_ = nullptr;
    const unsigned char* offsets_ = nullptr;
    const unsigned char* doc_indices_ = nullptr;
};

}  // namespace gpt::data
