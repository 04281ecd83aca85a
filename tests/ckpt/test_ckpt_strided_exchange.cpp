// The save's two-phase path for strided tensors (ckpt/strided_exchange.hpp): row-parallel
// slices (one short run per row and rank) are exchanged into page-aligned domains and
// written with O_DIRECT by the domain owners. Checked at 2 and 4 ranks: the bytes read back
// exactly (checksums verified), only the dataset's partial first and last pages go through
// the page cache, every byte is received by exactly one owner, and the same data saved
// without the exchange (independent I/O, a background save) reads back the same.
#include <gtest/gtest.h>

#include <deque>

#include "ckpt/checkpoint.hpp"
#include "ckpt/strided_exchange.hpp"
#include "ckpt_test_util.hpp"
#include "h5_damage.hpp"
#include "core/errors.hpp"
#include "test_env.hpp"

namespace gpt::ckpt {
namespace {

using namespace gpt::ckpt::test;

constexpr std::uint64_t kPage = 4096;

TEST(SplitDomains, InnerBoundsArePagesOfTheFileAndCoverTheDataset) {
    for (std::uint64_t base : {std::uint64_t{0}, std::uint64_t{4096 * 3}, std::uint64_t{12345}})
        for (std::uint64_t total : {std::uint64_t{1000}, std::uint64_t{1} << 20, (std::uint64_t{5} << 20) + 77})
            for (int n : {1, 2, 3, 4, 8}) {
                const Domains d = split_domains(base, total, n, 5, 256 << 10, kPage);
                ASSERT_GE(d.count(), 1);
                EXPECT_LE(d.count(), n);
                EXPECT_LE(d.count(), std::max<std::uint64_t>(1, total / (256 << 10)));
                EXPECT_EQ(d.bounds.front(), 0u);
                EXPECT_EQ(d.bounds.back(), total);
                for (int k = 1; k < d.count(); ++k) {
                    EXPECT_LT(d.bounds[k - 1], d.bounds[k]);
                    EXPECT_EQ((base + d.bounds[k]) % kPage, 0u) << "base " << base << " total " << total << " n " << n;
                }
                // Owners are distinct ranks, starting at the rotation.
                std::vector<int> seen(n, 0);
                for (int k = 0; k < d.count(); ++k) ++seen[d.owner(k, n)];
                for (int c : seen) EXPECT_LE(c, 1);
                EXPECT_EQ(d.owner(0, n), 5 % n);
            }
}

// A row-parallel fp16 weight [rows, cols] split by columns: each rank writes one run of
// cols/p elements per row. 2 x 0.26 MB / p per run... large enough for several domains.
struct RowParallel {
    Shape shape{640, 1030};
    std::string name = "language_model/encoder/layers.0/mlp/dense_4h_to_h/weight";
    Selection mine(int r, int p) const {
        auto [lo, hi] = split_range(shape[1], r, p);
        return Selection::box({0, lo}, {shape[0], hi - lo});
    }
};

struct Saved {
    WriteStats stats;
    std::string file;
};

Saved save(const RowParallel& t, const std::string& dir, const WriterOptions& wo, std::uint64_t seed) {
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    const Selection sel = t.mine(r, p);
    const std::vector<unsigned char> bytes = to_bytes(packed_values(3, t.shape, sel, seed), DType::F16);
    // A small dataset first, so that the big one starts off a page boundary of the file.
    const Shape small{37};
    const std::vector<unsigned char> sb = to_bytes(packed_values(4, small, Selection::all(), seed), DType::F32);
    CheckpointWriter w(MPI_COMM_WORLD, dir, 1, wo);
    w.write({{"small/bias", small, DType::F32, r == 0 ? Selection::all() : Selection::none(), sb.data()},
             {t.name, t.shape, DType::F16, sel, bytes.data()}});
    w.commit();
    return {w.stats(), checkpoint_file(dir, 1).string()};
}

void expect_reads_back(const RowParallel& t, const std::string& file, std::uint64_t seed) {
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    CheckpointReader reader(MPI_COMM_WORLD, file);
    // Rows, not the columns it was written by: every rank reads bytes other ranks sent.
    auto [lo, hi] = split_range(t.shape[0], p - 1 - r, p);
    const Selection rows = Selection::box({lo, 0}, {hi - lo, t.shape[1]});
    std::vector<unsigned char> got(rows.num_elements(t.shape) * 2);
    reader.read({{t.name, t.shape, DType::F16, rows, got.data()}});
    EXPECT_EQ(from_bytes(got, DType::F16), packed_values(3, t.shape, rows, seed));
    reader.verify_all();
}

std::uint64_t sum_over_ranks(std::uint64_t v) {
    std::uint64_t s = 0;
    MPI_Allreduce(&v, &s, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return s;
}

TEST(StridedExchange, RowParallelSlicesAreWrittenDirectByDomainOwners) {
    const RowParallel t;
    const Saved s = save(t, gpt::test::scratch_dir("ckpt_strided_auto"), {}, 1);
    expect_reads_back(t, s.file, 1);
    const std::uint64_t total = static_cast<std::uint64_t>(num_elements(t.shape)) * 2;
    // Every byte of the strided tensor was received by exactly one owner, and written there.
    EXPECT_EQ(sum_over_ranks(s.stats.exchanged_bytes), total);
    // Through the page cache: only partial pages (the strided tensor's first and last, the
    // small dataset's), no rank's short runs.
    EXPECT_LE(sum_over_ranks(s.stats.buffered_bytes), 3 * kPage + 37 * 4);
    EXPECT_GE(sum_over_ranks(s.stats.direct_bytes), total - 2 * kPage);
}

TEST(StridedExchange, IndependentAndBackgroundSavesWriteTheSameBytes) {
    const RowParallel t;
    WriterOptions independent;
    independent.io_mode = IoMode::Independent;
    const Saved a = save(t, gpt::test::scratch_dir("ckpt_strided_indep"), independent, 2);
    EXPECT_EQ(a.stats.exchanged_bytes, 0u);
    expect_reads_back(t, a.file, 2);
    WriterOptions background;
    background.background = true;
    const Saved b = save(t, gpt::test::scratch_dir("ckpt_strided_bg"), background, 3);
    EXPECT_EQ(b.stats.exchanged_bytes, 0u);
    expect_reads_back(t, b.file, 3);
}

TEST(StridedExchange, ASelectionThatLeavesAGapIsRefusedOnEveryRank) {
    // Coverage is checked before the exchange (selections add up to the tensor), so plant
    // overlapping runs that add up: rank 0 writes column 0 twice, rank p-1 skips its last.
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    const Shape shape{300, 1024};
    std::vector<Selection> parts;
    auto [lo, hi] = split_range(shape[1], r, p);
    if (r == 0) parts = {Selection::box({0, 0}, {shape[0], hi})};
    else if (r == p - 1) parts = {Selection::box({0, lo - 1}, {shape[0], hi - lo})};
    else parts = {Selection::box({0, lo}, {shape[0], hi - lo})};
    const std::vector<unsigned char> bytes(parts[0].num_elements(shape) * 2, 1);
    CheckpointWriter w(MPI_COMM_WORLD, gpt::test::scratch_dir("ckpt_strided_gap"), 1);
    EXPECT_THROW(w.write({{"w", shape, DType::F16, parts[0], bytes.data()}}), InternalError);
}

// The load's mirror: column slices (strided) are read once, by the domain owners, handed
// out, and verified from the owners' sums without a second pass; also into another float
// type and by replicas (two ranks asking for the same slice).
TEST(StridedGather, ColumnSlicesAreReadOnceByOwnersAndVerifiedWithoutASecondPass) {
    const RowParallel t;
    const Saved saved = save(t, gpt::test::scratch_dir("ckpt_strided_gather"), {}, 4);
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    const int parts = p >= 4 ? p / 2 : p;  // replicas in pairs at 4 ranks
    const Selection cols = t.mine(r % parts, parts);
    CheckpointReader reader(MPI_COMM_WORLD, saved.file);
    std::vector<unsigned char> half(cols.num_elements(t.shape) * 2);
    std::vector<float> single(cols.num_elements(t.shape));
    reader.read({{t.name, t.shape, DType::F16, cols, half.data()}});
    EXPECT_EQ(from_bytes(half, DType::F16), packed_values(3, t.shape, cols, 4));
    reader.read({{t.name, t.shape, DType::F32, cols, single.data()}});
    EXPECT_EQ(single, packed_values(3, t.shape, cols, 4));
    const std::uint64_t total = static_cast<std::uint64_t>(num_elements(t.shape)) * 2;
    EXPECT_EQ(sum_over_ranks(reader.stats().gathered_bytes), 2 * total);  // two reads, each byte once
    EXPECT_EQ(reader.stats().rechecked_tensors, 0);
}

TEST(StridedGather, DamageInAStridedTensorIsFoundByTheOwnersSums) {
    const RowParallel t;
    const Saved saved = save(t, gpt::test::scratch_dir("ckpt_strided_gather_damage"), {}, 5);
    MPI_Barrier(MPI_COMM_WORLD);
    // The tensor's last byte: in the last domain, whoever owns it.
    if (comm_rank(MPI_COMM_WORLD) == 0)
        gpt::test::flip_dataset_bits(saved.file, t.name.c_str(), num_elements(t.shape) * 2 - 1, 0x01);
    MPI_Barrier(MPI_COMM_WORLD);
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    const Selection cols = t.mine(r, p);
    std::vector<unsigned char> half(cols.num_elements(t.shape) * 2);
    CheckpointReader reader(MPI_COMM_WORLD, saved.file);
    try {
        reader.read({{t.name, t.shape, DType::F16, cols, half.data()}});
        ADD_FAILURE() << "damage not found";
    } catch (const DataError& e) {
        EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace gpt::ckpt
