// Single-process checks of the pieces under the checkpoint layer: selections, checksums,
// manifest encoding, names, and the save-folder helpers (tracker, retention, temp folders).
#include <gtest/gtest.h>

#include <fstream>
#include <numeric>
#include <random>

#include "ckpt/checkpoint_dir.hpp"
#include "ckpt/checksum.hpp"
#include "ckpt/manifest.hpp"
#include "ckpt/selection.hpp"
#include "core/errors.hpp"
#include "test_env.hpp"

namespace gpt::ckpt {
namespace {

// Flat indices a selection covers, in packed order.
std::vector<std::int64_t> covered(const Shape& shape, const Selection& sel) {
    std::vector<std::int64_t> out;
    for (const Box& b : sel.boxes(shape))
        for_each_run(shape, b, [&](std::int64_t s, std::int64_t n) {
            for (std::int64_t i = 0; i < n; ++i) out.push_back(s + i);
        });
    return out;
}

TEST(CkptSelection, FlatRangeBecomesFewBoxesInFlatOrder) {
    const Shape shape{4, 5, 6};
    std::mt19937 rng(7);
    for (int trial = 0; trial < 500; ++trial) {
        const std::int64_t n = num_elements(shape);
        std::int64_t a = rng() % (n + 1), b = rng() % (n + 1);
        if (a > b) std::swap(a, b);
        const Selection sel = Selection::flat(a, b - a);
        std::vector<std::int64_t> expect(b - a);
        std::iota(expect.begin(), expect.end(), a);
        ASSERT_EQ(covered(shape, sel), expect) << "range [" << a << ", " << b << ")";
        EXPECT_LE(sel.boxes(shape).size(), 2 * shape.size() - 1);
        EXPECT_EQ(sel.num_elements(shape), b - a);
    }
}

TEST(CkptSelection, FlatRangeOfABoxFollowsTheBoxOrder) {
    // The distributed optimizer's shard of a tensor-parallel column slice.
    const Shape shape{4, 5, 6};
    const Shape off{1, 1, 2}, cnt{3, 3, 4};
    std::vector<std::int64_t> box_order;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            for (int k = 0; k < 4; ++k) box_order.push_back((1 + i) * 30 + (1 + j) * 6 + (2 + k));
    for (std::int64_t a = 0; a <= 36; a += 5)
        for (std::int64_t b = a; b <= 36; b += 7) {
            const Selection sel = Selection::flat_in_box(off, cnt, a, b - a);
            EXPECT_NO_THROW(sel.check_fits(shape, "t", "x"));
            ASSERT_EQ(covered(shape, sel), std::vector<std::int64_t>(box_order.begin() + a, box_order.begin() + b))
                << a << ".." << b;
        }
    EXPECT_THROW(Selection::flat_in_box(off, cnt, 30, 7).check_fits(shape, "t", "x"), InternalError);
}

TEST(CkptSelection, BoxRunsMergeFullTrailingDimensions) {
    const Shape shape{4, 5, 6};
    int runs = 0;
    for_each_run(shape, Box{{1, 0, 0}, {2, 5, 6}}, [&](std::int64_t s, std::int64_t n) {
        EXPECT_EQ(s, 30);
        EXPECT_EQ(n, 60);
        ++runs;
    });
    EXPECT_EQ(runs, 1);
    // A column slice: one run per (i, j) row.
    std::vector<std::int64_t> cells = covered(shape, Selection::box({0, 1, 2}, {2, 2, 3}));
    std::vector<std::int64_t> expect;
    for (int i = 0; i < 2; ++i)
        for (int j = 1; j < 3; ++j)
            for (int k = 2; k < 5; ++k) expect.push_back(i * 30 + j * 6 + k);
    EXPECT_EQ(cells, expect);
}

TEST(CkptSelection, RejectsSelectionsOutsideTheTensor) {
    EXPECT_THROW(Selection::box({0, 3}, {1, 4}).check_fits({2, 6}, "t", "x"), InternalError);
    EXPECT_THROW(Selection::box({0}, {1}).check_fits({2, 6}, "t", "x"), InternalError);
    EXPECT_THROW(Selection::flat(10, 3).check_fits({2, 6}, "t", "x"), InternalError);
    EXPECT_THROW(Selection::all().check_fits({}, "t", "x"), InternalError);
    EXPECT_NO_THROW(Selection::flat(9, 3).check_fits({2, 6}, "t", "x"));
}

TEST(CkptChecksum, PartsAddUpToTheWholeWhateverTheCuts) {
    std::vector<unsigned char> bytes(20011);  // crosses two 2048-word weight blocks
    std::mt19937 rng(3);
    for (auto& b : bytes) b = static_cast<unsigned char>(rng());
    const std::uint64_t whole = checksum_bytes(0, bytes.data(), bytes.size());
    for (int trial = 0; trial < 200; ++trial) {
        std::vector<std::size_t> cuts{0, bytes.size()};
        for (int c = 0; c < 5; ++c) cuts.push_back(rng() % bytes.size());
        std::sort(cuts.begin(), cuts.end());
        std::uint64_t sum = 0;
        // Add the pieces in reverse order: the combination must not depend on order.
        for (std::size_t i = cuts.size() - 1; i > 0; --i)
            sum = checksum_add(sum, checksum_bytes(cuts[i - 1], bytes.data() + cuts[i - 1], cuts[i] - cuts[i - 1]));
        ASSERT_EQ(sum, whole);
    }
}

TEST(CkptChecksum, DetectsFlippedBitsAndSwappedWords) {
    std::vector<unsigned char> bytes(256);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 31);
    const std::uint64_t good = checksum_bytes(0, bytes.data(), bytes.size());
    for (std::size_t pos = 0; pos < bytes.size(); pos += 17)
        for (int bit = 0; bit < 8; ++bit) {
            bytes[pos] ^= 1u << bit;
            EXPECT_NE(checksum_bytes(0, bytes.data(), bytes.size()), good) << pos << ":" << bit;
            bytes[pos] ^= 1u << bit;
        }
    std::swap_ranges(bytes.begin(), bytes.begin() + 8, bytes.begin() + 64);
    EXPECT_NE(checksum_bytes(0, bytes.data(), bytes.size()), good);
}

TEST(CkptChecksum, TopBitFlipsInTwoWordsDoNotCancel) {
    // Modulo 2^64 these two flips would cancel exactly (2^63 * odd + 2^63 * odd = 0).
    std::vector<unsigned char> bytes(64, 0x41);
    const std::uint64_t good = checksum_bytes(0, bytes.data(), bytes.size());
    for (std::size_t a = 3; a < 64; a += 4)
        for (std::size_t b = a + 4; b < 64; b += 4) {
            bytes[a] ^= 0x80;
            bytes[b] ^= 0x80;
            EXPECT_NE(checksum_bytes(0, bytes.data(), bytes.size()), good) << a << "," << b;
            bytes[a] ^= 0x80;
            bytes[b] ^= 0x80;
        }
}

TEST(CkptChecksum, LargeBuffersSplitInTwoStillAddUp) {
    // More words than one accumulator fold (2^20), with a ragged tail.
    std::vector<unsigned char> big((std::size_t(1) << 22) * 4 + 3, 0xff);
    std::uint64_t halves = checksum_add(checksum_bytes(0, big.data(), big.size() / 2),
                                        checksum_bytes(big.size() / 2, big.data() + big.size() / 2,
                                                       big.size() - big.size() / 2));
    EXPECT_EQ(halves, checksum_bytes(0, big.data(), big.size()));
    EXPECT_LT(halves, kChecksumPrime);
}

TEST(CkptManifest, RoundTripsAndRejectsDamage) {
    std::vector<ManifestEntry> entries{{"a/b.0/weight", h5::Stored::BF16, {3, 4}, 0x0123456789abcdefull},
                                       {"_checkpoint/rank_blobs/rng/bytes", h5::Stored::U8, {7}, 42}};
    const std::string text = encode_manifest(entries);
    const auto back = parse_manifest(text, "f.h5");
    ASSERT_EQ(back.size(), 2u);
    EXPECT_EQ(back[0].name, "a/b.0/weight");
    EXPECT_EQ(back[0].type, h5::Stored::BF16);
    EXPECT_EQ(back[0].shape, (Shape{3, 4}));
    EXPECT_EQ(back[0].checksum, 0x0123456789abcdefull);
    std::string damaged = text;
    damaged[damaged.find("bf16")] = 'x';
    try {
        parse_manifest(damaged, "f.h5");
        FAIL() << "damaged manifest accepted";
    } catch (const DataError& e) {
        EXPECT_NE(std::string(e.what()).find("f.h5"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos);
    }
}

TEST(CkptManifest, TensorNames) {
    EXPECT_NO_THROW(check_tensor_name("language_model/encoder/layers.3/self_attention/query_key_value/weight"));
    EXPECT_NO_THROW(check_tensor_name("optimizer/exp_avg/language_model/embedding/word_embeddings/weight"));
    for (const char* bad : {"", "/a", "a/", "a//b", "a/../b", "a b", "_checkpoint/x", "a\tb"})
        EXPECT_THROW(check_tensor_name(bad), InternalError) << bad;
}

TEST(CkptDir, TrackerIsAtomicAndValidated) {
    const fs::path root = test::scratch_dir("ckpt_dir_tracker");
    EXPECT_FALSE(read_tracker(root).has_value());
    write_tracker(root, 1200);
    EXPECT_EQ(read_tracker(root), 1200);
    for (const auto& e : fs::directory_iterator(root))  // no temp file left behind
        EXPECT_EQ(e.path().filename(), kTrackerFile);
    std::ofstream(root / kTrackerFile) << "release\n";
    EXPECT_THROW(read_tracker(root), DataError);
}

TEST(CkptDir, RetentionKeepsTheNewestAndLeavesLaterRunsAlone) {
    const fs::path root = test::scratch_dir("ckpt_dir_retention");
    for (int it : {100, 200, 300, 400, 900}) fs::create_directories(root / iteration_dir_name(it));
    fs::create_directories(root / "iter_0000500.tmp-77");
    std::ofstream(root / (std::string(kTrackerFile) + ".tmp-123")) << "4";
    fs::create_directories(root / "unrelated");
    EXPECT_EQ(list_iterations(root), (std::vector<std::int64_t>{100, 200, 300, 400, 900}));
    EXPECT_EQ(apply_retention(root, 400, 2), (std::vector<std::int64_t>{100, 200}));
    EXPECT_EQ(list_iterations(root), (std::vector<std::int64_t>{300, 400, 900}));
    EXPECT_TRUE(apply_retention(root, 400, 0).empty());
    const auto removed = remove_stale_temp_dirs(root, root / "iter_0000400");
    ASSERT_EQ(removed.size(), 2u);
    EXPECT_TRUE(std::count(removed.begin(), removed.end(), root / "iter_0000500.tmp-77"));
    EXPECT_TRUE(std::count(removed.begin(), removed.end(), root / (std::string(kTrackerFile) + ".tmp-123")));
    EXPECT_TRUE(fs::exists(root / "unrelated"));
}

TEST(CkptDir, PublishReplacesAFolderTheTrackerNeverNamed) {
    const fs::path root = test::scratch_dir("ckpt_dir_publish");
    fs::create_directories(root / "iter_0000010");
    std::ofstream(root / "iter_0000010" / "old") << "x";
    fs::create_directories(root / "iter_0000010.tmp-1");
    std::ofstream(root / "iter_0000010.tmp-1" / "new") << "y";
    publish_dir(root / "iter_0000010.tmp-1", root / "iter_0000010");
    EXPECT_TRUE(fs::exists(root / "iter_0000010" / "new"));
    EXPECT_FALSE(fs::exists(root / "iter_0000010" / "old"));
    EXPECT_EQ(list_iterations(root), (std::vector<std::int64_t>{10}));
    EXPECT_EQ(std::distance(fs::directory_iterator(root), fs::directory_iterator()), 1);
}

}  // namespace
}  // namespace gpt::ckpt
