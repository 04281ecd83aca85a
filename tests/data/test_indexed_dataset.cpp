// Megatron's .bin/.idx format field by field, and the reader's validation of damaged files.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/errors.hpp"
#include "data/indexed_dataset.hpp"
#include "data_test_util.hpp"
#include "test_env.hpp"

using namespace gpt::data;
using namespace gpt::data::test;

namespace {

template <typename T>
T at(const std::string& bytes, std::size_t offset) {
    T v;
    std::memcpy(&v, bytes.data() + offset, sizeof(T));
    return v;
}

// Documents: {[1,2,3]}, {} (empty), {[4], [5,6]} (two sequences), in uint16.
std::string write_sample(const std::string& dir, TokenDType dtype = TokenDType::U16) {
    const std::string prefix = dir + "/sample";
    IndexedDatasetWriter w(prefix, dtype);
    std::vector<std::int32_t> a{1, 2, 3}, b{4}, c{5, 6};
    w.add_sequence(a);
    w.end_document();
    w.end_document();
    w.add_sequence(b);
    w.add_sequence(c);
    w.end_document();
    w.finalize();
    return prefix;
}

void expect_data_error(const std::string& prefix, const std::string& needle) {
    try {
        IndexedDataset d(prefix);
        ADD_FAILURE() << "accepted a damaged dataset (expected '" << needle << "')";
    } catch (const gpt::Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(prefix), std::string::npos) << "message must name the file: " << e.what();
    }
}

}  // namespace

TEST(IndexedDataset, IdxLayoutFieldByField) {
    const std::string prefix = write_sample(gpt::test::scratch_dir("idx_layout"));
    const std::string idx = read_file(prefix + ".idx"), bin = read_file(prefix + ".bin");
    ASSERT_EQ(idx.size(), 34u + 3 * 4 + 3 * 8 + 4 * 8);
    EXPECT_EQ(idx.substr(0, 9), std::string("MMIDIDX\0\0", 9));
    EXPECT_EQ(at<std::uint64_t>(idx, 9), 1u);   // version
    EXPECT_EQ(static_cast<int>(idx[17]), 8);     // uint16
    EXPECT_EQ(at<std::uint64_t>(idx, 18), 3u);  // sequences
    EXPECT_EQ(at<std::uint64_t>(idx, 26), 4u);  // document indices = documents + 1
    const std::int32_t lengths[] = {3, 1, 2};
    const std::int64_t offsets[] = {0, 6, 8}, docs[] = {0, 1, 1, 3};
    for (int i = 0; i < 3; ++i) EXPECT_EQ(at<std::int32_t>(idx, 34 + 4 * i), lengths[i]);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(at<std::int64_t>(idx, 46 + 8 * i), offsets[i]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(at<std::int64_t>(idx, 70 + 8 * i), docs[i]);
    ASSERT_EQ(bin.size(), 12u);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(at<std::uint16_t>(bin, 2 * i), i + 1);
}

TEST(IndexedDataset, ReadsBackBothDtypes) {
    const std::string dir = gpt::test::scratch_dir("idx_read");
    for (TokenDType t : {TokenDType::U16, TokenDType::I32}) {
        const std::string prefix = write_sample(dir, t);
        IndexedDataset d(prefix);
        EXPECT_EQ(d.dtype(), t);
        EXPECT_EQ(d.num_sequences(), 3);
        EXPECT_EQ(d.num_documents(), 3);
        EXPECT_EQ(d.sequence(0), (std::vector<std::int32_t>{1, 2, 3}));
        EXPECT_EQ(d.sequence(2), (std::vector<std::int32_t>{5, 6}));
        std::int32_t two[2];
        d.read(0, 1, 2, two);
        EXPECT_EQ(two[0], 2);
        EXPECT_EQ(two[1], 3);
    }
    EXPECT_EQ(best_fitting_dtype(50257), TokenDType::U16);
    EXPECT_EQ(best_fitting_dtype(65500), TokenDType::I32);
}

TEST(IndexedDataset, RejectsDamagedFiles) {
    const std::string dir = gpt::test::scratch_dir("idx_damaged");
    const std::string prefix = write_sample(dir);
    const std::string idx = read_file(prefix + ".idx"), bin = read_file(prefix + ".bin");
    auto with = [&](const std::string& i, const std::string& b) {
        write_file(prefix + ".idx", i);
        write_file(prefix + ".bin", b);
    };
    with(idx.substr(0, 20), bin);
    expect_data_error(prefix, "truncated");
    with(idx.substr(0, idx.size() - 1), bin);
    expect_data_error(prefix, "truncated");
    std::string bad = idx;
    bad[0] = 'X';
    with(bad, bin);
    expect_data_error(prefix, "magic");
    bad = idx;
    bad[9] = 2;
    with(bad, bin);
    expect_data_error(prefix, "version");
    bad = idx;
    bad[17] = 9;
    with(bad, bin);
    expect_data_error(prefix, "dtype");
    bad = idx;
    bad[18] = 100;  // sequence count no longer matches the file length
    with(bad, bin);
    expect_data_error(prefix, "needs");
    bad = idx;
    bad[25] = 0x7f;  // absurd sequence count: must not overflow the size check
    with(bad, bin);
    expect_data_error(prefix, "impossible");
    with(idx, bin.substr(0, 10));
    expect_data_error(prefix, "truncated");
    with(idx, bin + "xx");
    expect_data_error(prefix, "do not belong together");
    bad = idx;
    bad[46 + 8] = 7;  // second sequence's byte offset
    with(bad, bin);
    expect_data_error(prefix, "starts at byte");
    bad = idx;
    bad[70 + 8] = 2;
    bad[70 + 16] = 1;  // document indices decrease
    with(bad, bin);
    expect_data_error(prefix, "document index");
    std::filesystem::remove(prefix + ".bin");
    expect_data_error(prefix, "cannot open");
}

// A corpus of a million documents checks its document index on a second thread: the same
// verdicts and messages as the one-thread check above, for a damaged sequence and document.
TEST(IndexedDataset, RejectsDamagedLargeFiles) {
    const std::string dir = gpt::test::scratch_dir("idx_damaged_large");
    const std::string prefix = dir + "/large";
    constexpr std::int64_t kDocuments = std::int64_t{1} << 19;  // + as many sequences: 2^20
    {
        IndexedDatasetWriter w(prefix, TokenDType::U16);
        const std::vector<std::int32_t> one{7};
        for (std::int64_t d = 0; d < kDocuments; ++d) {
            w.add_sequence(one);
            w.end_document();
        }
        w.finalize();
    }
    EXPECT_EQ(IndexedDataset(prefix).num_sequences(), kDocuments);
    const std::string idx = read_file(prefix + ".idx");
    const std::size_t offsets = 34 + 4 * kDocuments, documents = offsets + 8 * kDocuments;
    std::string bad = idx;
    bad[documents + 8 * (kDocuments - 5)] = 9;  // a document index far past its neighbours
    write_file(prefix + ".idx", bad);
    expect_data_error(prefix, "document index " + std::to_string(kDocuments - 5));
    bad = idx;
    bad[offsets + 8 * (kDocuments - 3)] ^= 1;  // a sequence's byte offset
    write_file(prefix + ".idx", bad);
    expect_data_error(prefix, "sequence " + std::to_string(kDocuments - 3) + " starts at byte");
}

TEST(IndexedDataset, AbandonedWriterLeavesNothing) {
    const std::string dir = gpt::test::scratch_dir("idx_abandon");
    {
        IndexedDatasetWriter w(dir + "/x", TokenDType::U16);
        std::vector<std::int32_t> a{1, 2};
        w.add_sequence(a);
        w.end_document();
    }
    EXPECT_TRUE(std::filesystem::is_empty(dir));
    IndexedDatasetWriter w(dir + "/y", TokenDType::U16);
    std::vector<std::int32_t> too_big{70000};
    EXPECT_THROW(w.add_sequence(too_big), gpt::DataError);
}

// TikTokenizer vocabularies (cl100k_base + 1000 special tokens: 101256 ids) need 32 bits:
// the .bin holds little-endian int32 (Megatron's dtype code 4) and reads back unchanged.
TEST(IndexedDataset, Int32TokensAbove65535) {
    const std::string prefix = gpt::test::scratch_dir("idx_int32") + "/big";
    const std::vector<std::int32_t> ids{65535, 65536, 101255, 0x01020304, 0x7FFFFFFF};
    {
        IndexedDatasetWriter w(prefix, best_fitting_dtype(101256));
        w.add_sequence(ids);
        w.end_document();
        w.finalize();
    }
    const std::string idx = read_file(prefix + ".idx"), bin = read_file(prefix + ".bin");
    EXPECT_EQ(at<std::uint8_t>(idx, 17), 4);  // after magic (9) and version (8)
    ASSERT_EQ(bin.size(), 4 * ids.size());
    EXPECT_EQ(bin.substr(12, 4), std::string("\x04\x03\x02\x01", 4));  // little-endian
    for (std::size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(at<std::int32_t>(bin, 4 * i), ids[i]);
    IndexedDataset d(prefix);
    EXPECT_EQ(d.dtype(), TokenDType::I32);
    EXPECT_EQ(d.sequence(0), ids);
    std::int32_t two[2];
    d.read(0, 1, 2, two);
    EXPECT_EQ(two[0], 65536);
    EXPECT_EQ(two[1], 101255);
}
