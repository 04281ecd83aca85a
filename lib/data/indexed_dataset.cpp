#include "data/indexed_dataset.hpp"

#include <cerrno>
#include <cstring>
#include <future>
#include <unistd.h>

#include "core/errors.hpp"
#include "data/mapped_file.hpp"
#include "data/temp_files.hpp"

namespace gpt::data {

namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr std::uint64_t kVersion = 1;
constexpr std::size_t kHeaderSize = 9 + 8 + 1 + 8 + 8;
constexpr std::size_t kBufferSize = 1 << 20;

template <typename T>
T load(const unsigned char* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

template <typename T>
void put(std::vector<char>& out, T v) {
    const char* p = reinterpret_cast<const char*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
}

bool valid_code(std::uint8_t c) { return c >= 1 && c <= 8; }

}  // namespace

std::size_t token_dtype_size(TokenDType t) {
    switch (t) {
        case TokenDType::U8: case TokenDType::I8: return 1;
        case TokenDType::I16: case TokenDType::U16: return 2;
        case TokenDType::I32: case TokenDType::F32: return 4;
        case TokenDType::I64: case TokenDType::F64: return 8;
    }
    return 0;
}

const char* token_dtype_name(TokenDType t) {
    switch (t) {
        case TokenDType::U8: return "uint8";
        case TokenDType::I8: return "int8";
        case TokenDType::I16: return "int16";
        case TokenDType::I32: return "int32";
        case TokenDType::I64: return "int64";
        case TokenDType::F64: return "float64";
        case TokenDType::F32: return "float32";
        case TokenDType::U16: return "uint16";
    }
    return "?";
}

TokenDType best_fitting_dtype(std::int64_t vocab_size) {
    return vocab_size < 65500 ? TokenDType::U16 : TokenDType::I32;
}

// ---- writer ---------------------------------------------------------------------------

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, TokenDType dtype)
    : prefix_(std::move(prefix)), dtype_(dtype) {
    if (dtype_ != TokenDType::U16 && dtype_ != TokenDType::I32 && dtype_ != TokenDType::U8 && dtype_ != TokenDType::I64)
        GPT_THROW(UsageError, "token dtype ", token_dtype_name(dtype_), " is not supported for writing");
    bin_tmp_ = temp_name_for(bin_path(prefix_));
    idx_tmp_ = temp_name_for(idx_path(prefix_));
    remove_stale_temp_files(bin_path(prefix_));
    remove_stale_temp_files(idx_path(prefix_));
    remember_temp_file(bin_tmp_);
    remember_temp_file(idx_tmp_);
    bin_ = std::fopen(bin_tmp_.c_str(), "wb");
    if (!bin_) GPT_THROW(IoError, "cannot create '", bin_tmp_, "': ", errno_message(errno));
    buffer_.reserve(kBufferSize);
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
    if (bin_) std::fclose(bin_);
    if (!finalized_) {
        ::unlink(bin_tmp_.c_str());
        ::unlink(idx_tmp_.c_str());
        forget_temp_file(bin_tmp_);
        forget_temp_file(idx_tmp_);
    }
}

void IndexedDatasetWriter::flush_buffer() {
    if (buffer_.empty()) return;
    if (std::fwrite(buffer_.data(), 1, buffer_.size(), bin_) != buffer_.size())
        GPT_THROW(IoError, "cannot write '", bin_tmp_, "': ", errno_message(errno));
    buffer_.clear();
}

void IndexedDatasetWriter::write_bytes(const void* data, std::size_t n) {
    if (buffer_.size() + n > kBufferSize) flush_buffer();
    if (n >= kBufferSize) {
        if (std::fwrite(data, 1, n, bin_) != n) GPT_THROW(IoError, "cannot write '", bin_tmp_, "': ", errno_message(errno));
    } else {
        const char* p = static_cast<const char*>(data);
        buffer_.insert(buffer_.end(), p, p + n);
    }
    bin_bytes_ += static_cast<std::int64_t>(n);
}

void IndexedDatasetWriter::add_sequence(std::span<const std::int32_t> ids) {
    GPT_ASSERT(!finalized_, "add_sequence after finalize");
    if (ids.size() > static_cast<std::size_t>(INT32_MAX))
        GPT_THROW(DataError, "a sequence of ", ids.size(), " tokens exceeds the .idx format's int32 length");
    const std::size_t item = token_dtype_size(dtype_);
    char tmp[4096];
    std::size_t fill = 0;
    for (std::int32_t id : ids) {
        if (dtype_ == TokenDType::U16) {
            if (id < 0 || id > 0xFFFF) GPT_THROW(DataError, "token id ", id, " does not fit the dataset dtype uint16");
            std::uint16_t v = static_cast<std::uint16_t>(id);
            std::memcpy(tmp + fill, &v, 2);
        } else if (dtype_ == TokenDType::U8) {
            if (id < 0 || id > 0xFF) GPT_THROW(DataError, "token id ", id, " does not fit the dataset dtype uint8");
            tmp[fill] = static_cast<char>(id);
        } else if (dtype_ == TokenDType::I64) {
            std::int64_t v = id;
            std::memcpy(tmp + fill, &v, 8);
        } else {
            std::memcpy(tmp + fill, &id, 4);
        }
        fill += item;
        if (fill + 8 > sizeof(tmp)) {
            write_bytes(tmp, fill);
            fill = 0;
        }
    }
    if (fill) write_bytes(tmp, fill);
    lengths_.push_back(static_cast<std::int32_t>(ids.size()));
}

void IndexedDatasetWriter::end_document() { doc_indices_.push_back(static_cast<std::int64_t>(lengths_.size())); }

void IndexedDatasetWriter::append_dataset(const std::string& prefix) {
    IndexedDataset other(prefix);
    if (other.dtype() != dtype_)
        GPT_THROW(DataError, "cannot merge '", prefix, "': its dtype ", token_dtype_name(other.dtype()),
                  " differs from ", token_dtype_name(dtype_));
    const std::int64_t base = num_sequences();
    for (std::int64_t i = 0; i < other.num_sequences(); ++i) lengths_.push_back(other.sequence_length(i));
    for (std::int64_t d = 1; d <= other.num_documents(); ++d) doc_indices_.push_back(base + other.document_index(d));
    const unsigned char* p = other.bin_data();
    std::int64_t left = other.bin_size();
    while (left > 0) {
        std::size_t n = static_cast<std::size_t>(std::min<std::int64_t>(left, kBufferSize));
        write_bytes(p, n);
        p += n;
        left -= static_cast<std::int64_t>(n);
    }
}

void IndexedDatasetWriter::finalize() {
    GPT_ASSERT(!finalized_, "finalize called twice");
    flush_buffer();
    int err = std::fflush(bin_) != 0 ? errno : 0;
    if (err == 0 && ::fsync(::fileno(bin_)) != 0) err = errno;
    if (std::fclose(bin_) != 0 && err == 0) err = errno;
    bin_ = nullptr;
    if (err != 0) GPT_THROW(IoError, "cannot write '", bin_tmp_, "': ", errno_message(err));

    const std::int64_t S = num_sequences(), D = static_cast<std::int64_t>(doc_indices_.size());
    std::vector<char> idx;
    idx.reserve(kHeaderSize + static_cast<std::size_t>(S) * 12 + static_cast<std::size_t>(D) * 8);
    idx.insert(idx.end(), kMagic, kMagic + 9);
    put<std::uint64_t>(idx, kVersion);
    put<std::uint8_t>(idx, static_cast<std::uint8_t>(dtype_));
    put<std::uint64_t>(idx, static_cast<std::uint64_t>(S));
    put<std::uint64_t>(idx, static_cast<std::uint64_t>(D));
    for (std::int32_t len : lengths_) put<std::int32_t>(idx, len);
    const std::int64_t item = static_cast<std::int64_t>(token_dtype_size(dtype_));
    std::int64_t offset = 0;
    for (std::int32_t len : lengths_) {
        put<std::int64_t>(idx, offset);
        offset += len * item;
    }
    for (std::int64_t d : doc_indices_) put<std::int64_t>(idx, d);
    GPT_ASSERT(offset == bin_bytes_, "sequence lengths disagree with bytes written");

    // Both new files are complete and on disk before the old pair is touched: a full disk
    // or a kill while writing leaves the previous dataset under this prefix intact. Then
    // the old .idx goes first, so the new .bin never sits beside an old index (a crash in
    // the instant between the renames leaves a .bin without .idx, refused at load, never a
    // mismatched pair).
    write_file_durably(idx_tmp_, idx.data(), idx.size());
    if (::unlink(idx_path(prefix_).c_str()) != 0 && errno != ENOENT)
        GPT_THROW(IoError, "cannot replace '", idx_path(prefix_), "': ", errno_message(errno));
    if (std::rename(bin_tmp_.c_str(), bin_path(prefix_).c_str()) != 0)
        GPT_THROW(IoError, "cannot rename '", bin_tmp_, "' to '", bin_path(prefix_), "': ", errno_message(errno));
    if (std::rename(idx_tmp_.c_str(), idx_path(prefix_).c_str()) != 0)
        GPT_THROW(IoError, "cannot rename '", idx_tmp_, "' to '", idx_path(prefix_), "': ", errno_message(errno));
    finalized_ = true;
    forget_temp_file(bin_tmp_);
    forget_temp_file(idx_tmp_);
}

// ---- reader ---------------------------------------------------------------------------

IndexedDataset::IndexedDataset(const std::string& prefix)
    : prefix_(prefix), idx_(idx_path(prefix)), bin_(bin_path(prefix)) {
    const std::string& ip = idx_.path();
    const unsigned char* p = idx_.data();
    const std::size_t n = idx_.size();
    if (n < kHeaderSize)
        GPT_THROW(DataError, "'", ip, "' is truncated: ", n, " bytes, shorter than the ", kHeaderSize, "-byte header");
    if (std::memcmp(p, kMagic, 9) != 0)
        GPT_THROW(DataError, "'", ip, "' is not a Megatron indexed dataset index (bad magic; expected MMIDIDX)");
    const auto version = load<std::uint64_t>(p + 9);
    if (version != kVersion) GPT_THROW(DataError, "'", ip, "' has index version ", version, "; only version 1 is supported");
    const std::uint8_t code = p[17];
    if (!valid_code(code)) GPT_THROW(DataError, "'", ip, "' has unknown dtype code ", int(code));
    dtype_ = static_cast<TokenDType>(code);
    item_size_ = token_dtype_size(dtype_);
    const auto S = load<std::uint64_t>(p + 18), D = load<std::uint64_t>(p + 26);
    // Bound the counts before multiplying so a corrupt header cannot overflow the size check.
    if (S > n || D > n || D == 0)
        GPT_THROW(DataError, "'", ip, "' is corrupt: sequence count ", S, " / document index count ", D,
                  " impossible for a ", n, "-byte file");
    const std::uint64_t expect = kHeaderSize + S * 4 + S * 8 + D * 8;
    if (n != expect)
        GPT_THROW(DataError, "'", ip, "' is ", n < expect ? "truncated" : "corrupt", ": ", n, " bytes, but its header (",
                  S, " sequences, ", D, " document indices) needs ", expect);
    num_sequences_ = static_cast<std::int64_t>(S);
    num_doc_indices_ = static_cast<std::int64_t>(D);
    lengths_ = p + kHeaderSize;
    offsets_ = lengths_ + S * 4;
    doc_indices_ = offsets_ + S * 8;

    const std::int64_t bin_bytes = bin_size();
    // Every open checks every sequence (a corpus of billions of tokens has millions): one
    // branch-free pass first; only a file that fails it is walked again for the message.
    // Unsigned, and held at or below the .bin's size at every step, so the sum cannot wrap.
    const auto bin = static_cast<std::uint64_t>(bin_bytes);
    const auto sequences_consistent = [&] {
        bool ok = true;
        std::uint64_t end = 0;
        for (std::int64_t i = 0; i < num_sequences_; ++i) {
            const auto len = load<std::int32_t>(lengths_ + i * 4);
            ok &= (len >= 0) & (load<std::uint64_t>(offsets_ + i * 8) == end);
            end += static_cast<std::uint64_t>(static_cast<std::uint32_t>(len)) * static_cast<std::uint64_t>(item_size_);
            ok &= end <= bin;
        }
        return ok && end == bin;
    };
    const auto documents_consistent = [&] {
        bool ok = load<std::uint64_t>(doc_indices_) == 0;
        std::uint64_t prev = 0;
        for (std::int64_t d = 0; d < num_doc_indices_; ++d) {
            const auto v = load<std::uint64_t>(doc_indices_ + d * 8);
            ok &= (v >= prev) & (v <= static_cast<std::uint64_t>(num_sequences_));
            prev = v;
        }
        return ok && prev == static_cast<std::uint64_t>(num_sequences_);
    };
    // A corpus of millions of documents checks its document index on a second thread (the
    // two passes read different parts of the .idx); a small one is not worth a thread.
    std::future<bool> documents;
    if (num_sequences_ + num_doc_indices_ >= (std::int64_t{1} << 20))
        documents = std::async(std::launch::async, documents_consistent);
    const bool sequences_ok = sequences_consistent();
    const bool documents_ok = documents.valid() ? documents.get() : documents_consistent();
    if (!sequences_ok) check_sequences(bin_bytes);
    if (!documents_ok) check_document_indices();
}

void IndexedDataset::check_sequences(std::int64_t bin_bytes) const {
    const std::string& ip = idx_.path();
    std::int64_t expect_offset = 0;
    for (std::int64_t i = 0; i < num_sequences_; ++i) {
        const std::int32_t len = sequence_length(i);
        const std::int64_t off = sequence_offset(i);
        if (len < 0) GPT_THROW(DataError, "'", ip, "' is corrupt: sequence ", i, " has negative length ", len);
        if (off != expect_offset)
            GPT_THROW(DataError, "'", ip, "' is corrupt: sequence ", i, " starts at byte ", off, ", expected ", expect_offset);
        expect_offset += static_cast<std::int64_t>(len) * static_cast<std::int64_t>(item_size_);
        if (expect_offset > bin_bytes)
            GPT_THROW(DataError, "'", bin_.path(), "' is truncated: ", bin_bytes, " bytes, but '", ip,
                      "' places sequence ", i, " up to byte ", expect_offset);
    }
    if (expect_offset != bin_bytes)
        GPT_THROW(DataError, "'", bin_.path(), "' has ", bin_bytes, " bytes, but '", ip, "' describes ", expect_offset,
                  " (the .bin and .idx do not belong together)");
}

void IndexedDataset::check_document_indices() const {
    const std::string& ip = idx_.path();
    std::int64_t prev = 0;
    for (std::int64_t d = 0; d < num_doc_indices_; ++d) {
        const std::int64_t v = document_index(d);
        if ((d == 0 && v != 0) || v < prev || v > num_sequences_)
            GPT_THROW(DataError, "'", ip, "' is corrupt: document index ", d, " is ", v,
                      " (must start at 0, never decrease and stay <= ", num_sequences_, ")");
        prev = v;
    }
    if (prev != num_sequences_)
        GPT_THROW(DataError, "'", ip, "' is corrupt: the last document ends at sequence ", prev, " of ", num_sequences_);
}

std::int64_t IndexedDataset::tokens_in(std::int64_t first, std::int64_t last) const {
    GPT_ASSERT(first >= 0 && first <= last && last <= num_sequences_, "sequences [", first, ", ", last, ") of ",
               num_sequences_);
    if (first == last) return 0;
    const std::int64_t end = last == num_sequences_ ? bin_size() : sequence_offset(last);
    return (end - sequence_offset(first)) / static_cast<std::int64_t>(item_size_);
}

std::int64_t IndexedDataset::sequence_offset(std::int64_t i) const {
    GPT_ASSERT(i >= 0 && i < num_sequences_, "sequence ", i, " of ", num_sequences_);
    return load<std::int64_t>(offsets_ + i * 8);
}

std::int64_t IndexedDataset::document_index(std::int64_t i) const {
    GPT_ASSERT(i >= 0 && i < num_doc_indices_, "document index ", i, " of ", num_doc_indices_);
    return load<std::int64_t>(doc_indices_ + i * 8);
}

void IndexedDataset::read(std::int64_t seq, std::int64_t offset, std::int64_t count, std::int32_t* out) const {
    const std::int32_t len = sequence_length(seq);
    GPT_ASSERT(offset >= 0 && count >= 0 && offset + count <= len, "read [", offset, ", ", offset + count,
               ") of a ", len, "-token sequence");
    const unsigned char* p = bin_.data() + sequence_offset(seq) + offset * static_cast<std::int64_t>(item_size_);
    switch (dtype_) {
        case TokenDType::U16:
            for (std::int64_t k = 0; k < count; ++k) out[k] = load<std::uint16_t>(p + 2 * k);
            break;
        case TokenDType::I32:
            // count may be 0 with out == nullptr (an empty sequence's vector): memcpy's
            // pointers must be valid even then.
            if (count > 0) std::memcpy(out, p, static_cast<std::size_t>(count) * 4);
            break;
        case TokenDType::U8:
            for (std::int64_t k = 0; k < count; ++k) out[k] = p[k];
            break;
        case TokenDType::I8:
            for (std::int64_t k = 0; k < count; ++k) out[k] = static_cast<std::int8_t>(p[k]);
            break;
        case TokenDType::I16:
            for (std::int64_t k = 0; k < count; ++k) out[k] = load<std::int16_t>(p + 2 * k);
            break;
        case TokenDType::I64:
            for (std::int64_t k = 0; k < count; ++k) out[k] = static_cast<std::int32_t>(load<std::int64_t>(p + 8 * k));
            break;
        case TokenDType::F32:
        case TokenDType::F64:
            GPT_THROW(DataError, "'", bin_.path(), "' holds floating-point values, not token ids");
    }
}

std::vector<std::int32_t> IndexedDataset::sequence(std::int64_t seq) const {
    std::vector<std::int32_t> out(static_cast<std::size_t>(sequence_length(seq)));
    read(seq, 0, static_cast<std::int64_t>(out.size()), out.data());
    return out;
}

}  // namespace gpt::data
