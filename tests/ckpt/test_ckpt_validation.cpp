// Damaged, incomplete and missing checkpoints are rejected with a message naming the file
// and what is wrong; --load-fallback picks the previous good one; keep-last retention; an
// abandoned save leaves the previous checkpoint loadable; different tensor lists throw on
// every rank; the host layout and early write-back helpers of the writer.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <fstream>
#include <functional>

#include "ckpt/checkpoint.hpp"
#include "ckpt/checkpoint_dir.hpp"
#include "ckpt/checksum_worker.hpp"
#include "ckpt/dataset_io.hpp"
#include "ckpt/collective.hpp"
#include "ckpt_test_util.hpp"
#include "core/errors.hpp"
#include "h5_damage.hpp"
#include "test_env.hpp"

namespace gpt::ckpt {
namespace {

using namespace gpt::ckpt::test;

const Shape kA{64, 16};  // fp32, rows split over ranks
const Shape kB{33};      // bf16, flat split over ranks

void save(const std::string& dir, std::int64_t it, int keep_last = 0) {
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    auto [a0, a1] = split_range(kA[0], r, p);
    auto [b0, b1] = split_range(kB[0], r, p);
    const Selection sa = Selection::box({a0, 0}, {a1 - a0, kA[1]}), sb = Selection::flat(b0, b1 - b0);
    const auto va = to_bytes(packed_values(0, kA, sa, it), DType::F32);
    const auto vb = to_bytes(packed_values(1, kB, sb, it), DType::BF16);
    CheckpointWriter w(MPI_COMM_WORLD, dir, it);
    w.write({{"w/a", kA, DType::F32, sa, va.data()}, {"w/b", kB, DType::BF16, sb, vb.data()}});
    w.set_attribute("iteration", it);
    w.commit(keep_last);
}

// The trainer's part of a load: read this rank's rows of w/a and check they are iteration it's.
void load_and_check(CheckpointReader& reader) {
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    auto [a0, a1] = split_range(kA[0], r, p);
    const Selection sa = Selection::box({a0, 0}, {a1 - a0, kA[1]});
    std::vector<float> a(sa.num_elements(kA));
    reader.read({{"w/a", kA, DType::F32, sa, a.data()}});
    EXPECT_EQ(a, packed_values(0, kA, sa, reader.iteration()));
    EXPECT_EQ(reader.attribute_int("iteration"), reader.iteration());
}

// Runs fn on rank 0 only, between barriers (damage is done by one process, like a disk would).
template <typename Fn>
void on_rank0(Fn&& fn) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (comm_rank(MPI_COMM_WORLD) == 0) fn();
    MPI_Barrier(MPI_COMM_WORLD);
}

void flip_byte(const std::string& file, const char* dataset, std::int64_t byte) {
    gpt::test::flip_dataset_bits(file, dataset, byte, 0x10);
}

void h5_edit(const std::string& file, void (*edit)(hid_t)) {
    hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    edit(f);
    H5Fclose(f);
}

// Expects opening `file` to throw E with every one of `needles` in the message.
template <typename E>
void expect_rejected(const std::string& file, std::initializer_list<const char*> needles,
                     const ReaderOptions& options = {}) {
    try {
        CheckpointReader reader(MPI_COMM_WORLD, file, options);
        ADD_FAILURE() << "accepted " << file;
    } catch (const E& e) {
        const std::string msg = e.what();
        for (const char* n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
    }
}

std::string file_of(const std::string& dir, std::int64_t it) { return checkpoint_file(dir, it).string(); }

TEST(CkptValidation, GoodCheckpointLoads) {
    const std::string dir = gpt::test::scratch_dir("ckpt_val_good");
    save(dir, 10);
    CheckpointReader reader(MPI_COMM_WORLD, file_of(dir, 10));
    load_and_check(reader);
}

TEST(CkptValidation, TruncatedFileIsRejected) {
    const std::string dir = gpt::test::scratch_dir("ckpt_val_trunc");
    save(dir, 10);
    const std::string file = file_of(dir, 10);
    on_rank0([&] { std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2); });
    expect_rejected<DataError>(file, {file.c_str(), "truncated"});
}

TEST(CkptValidation, MissingDatasetIsRejected) {
    const std::string dir = gpt::test::scratch_dir("ckpt_val_missing");
    save(dir, 10);
    const std::string file = file_of(dir, 10);
    on_rank0([&] { h5_edit(file, [](hid_t f) { H5Ldelete(f, "w/b", H5P_DEFAULT); }); });
    expect_rejected<DataError>(file, {file.c_str(), "'w/b'", "missing"});
    // A whole group gone (every layer tensor under it).
    on_rank0([&] { h5_edit(file, [](hid_t f) { H5Ldelete(f, "w", H5P_DEFAULT); }); });
    expect_rejected<DataError>(file, {"'w/a'", "missing"});
}

TEST(CkptValidation, FlippedBytesAreRejectedByChecksum) {
    const std::string dir = gpt::test::scratch_dir("ckpt_val_flip");
    save(dir, 10);
    const std::string file = file_of(dir, 10);
    on_rank0([&] { flip_byte(file, "w/b", 37); });
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    CheckpointReader reader(MPI_COMM_WORLD, file);  // the structure is intact
    load_and_check(reader);                         // and w/a is undamaged
    auto expect_mismatch = [&](const std::function<void()>& fn) {
        try {
            fn();
            ADD_FAILURE() << "damaged w/b accepted";
        } catch (const DataError& e) {
            const std::string msg = e.what();
            for (const char* n : {file.c_str(), "checksum mismatch", "'w/b'"})
                EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
        }
    };
    std::vector<std::uint16_t> b(kB[0]);
    // An exact partition of w/b over the ranks: verified from the data read, no extra I/O.
    const auto range = split_range(kB[0], r, p);  // not a structured binding: clang < 16 cannot capture one
    expect_mismatch([&] {
        reader.read({{"w/b", kB, DType::BF16, Selection::flat(range.first, range.second - range.first), b.data()}});
    });
    // Every rank reads all of it (replicas): counted once.
    expect_mismatch([&] { reader.read({{"w/b", kB, DType::BF16, Selection::all(), b.data()}}); });
    // One rank reads a part that does not even contain the flipped byte: the full pass finds it.
    const Selection head = r == 0 ? Selection::flat(0, 4) : Selection::none();
    expect_mismatch([&] { reader.read({{"w/b", kB, DType::F32, head, b.data()}}); });
    expect_mismatch([&] { reader.verify_all(); });
    ReaderOptions at_open;
    at_open.verify_all_at_open = true;
    expect_rejected<DataError>(file, {file.c_str(), "checksum mismatch", "'w/b'"}, at_open);
    // Verification off: the damaged bytes come back unnoticed, so it is what caught them.
    ReaderOptions off;
    off.verify_checksums = false;
    CheckpointReader unchecked(MPI_COMM_WORLD, file, off);
    EXPECT_NO_THROW(unchecked.read({{"w/b", kB, DType::BF16, Selection::all(), b.data()}}));
}

TEST(CkptValidation, DamageDeepInsideALargePieceIsFound) {
    // 8 MiB of fp32 written by rank 0 alone: the flipped byte sits in the second 4 MiB piece.
    const std::string dir = gpt::test::scratch_dir("ckpt_val_large");
    const Shape shape{2048, 1024};
    const bool root = comm_rank(MPI_COMM_WORLD) == 0;
    const Selection sel = root ? Selection::all() : Selection::none();
    {
        const std::vector<float> v = packed_values(3, shape, sel);
        CheckpointWriter w(MPI_COMM_WORLD, dir, 1);
        w.write({{"big", shape, DType::F32, sel, v.data()}});
        w.commit();
    }
    const std::string file = file_of(dir, 1);
    on_rank0([&] { flip_byte(file, "big", (std::int64_t(6) << 20) + 1); });
    CheckpointReader reader(MPI_COMM_WORLD, file);
    std::vector<float> out(sel.num_elements(shape));
    EXPECT_THROW(reader.read({{"big", shape, DType::F32, sel, out.data()}}), DataError);
}

TEST(CkptValidation, DamagedRankBlobIsRejected) {
    const std::string dir = gpt::test::scratch_dir("ckpt_val_blob");
    {
        CheckpointWriter w(MPI_COMM_WORLD, dir, 5);
        const std::string rng = "rng of rank " + std::to_string(comm_rank(MPI_COMM_WORLD));
        w.write_rank_blob("rng_state", rng.data(), rng.size());
        w.commit();
    }
    const std::string file = file_of(dir, 5);
    on_rank0([&] { flip_byte(file, "_checkpoint/rank_blobs/rng_state/bytes", 2); });
    CheckpointReader reader(MPI_COMM_WORLD, file);
    EXPECT_THROW(reader.read_rank_blob("rng_state", comm_rank(MPI_COMM_WORLD)), DataError);
}

TEST(CkptValidation, IncompleteFileIsRejected) {
    const std::string dir = gpt::test::scratch_dir("ckpt_val_incomplete");
    save(dir, 10);
    const std::string file = file_of(dir, 10);
    on_rank0([&] { h5_edit(file, [](hid_t f) { H5Adelete_by_name(f, "_checkpoint", "complete", H5P_DEFAULT); }); });
    expect_rejected<DataError>(file, {file.c_str(), "incomplete"});
}

TEST(CkptValidation, MissingFileIsAnIoError) {
    const std::string dir = gpt::test::scratch_dir("ckpt_val_nofile");
    expect_rejected<IoError>(file_of(dir, 10), {"iter_0000010", "does not exist"});
}

TEST(CkptValidation, ShapeMismatchOnReadNamesTheTensor) {
    const std::string dir = gpt::test::scratch_dir("ckpt_val_shape");
    save(dir, 10);
    CheckpointReader reader(MPI_COMM_WORLD, file_of(dir, 10));
    try {
        reader.read({{"w/a", Shape{64, 17}, DType::F32, Selection::none(), nullptr}});
        ADD_FAILURE() << "shape mismatch accepted";
    } catch (const DataError& e) {
        EXPECT_NE(std::string(e.what()).find("'w/a' is [64, 16]"), std::string::npos) << e.what();
    }
    EXPECT_THROW(reader.read({{"w/nope", kB, DType::F32, Selection::none(), nullptr}}), DataError);
}

TEST(CkptValidation, FallbackOnlyWhenAsked) {
    const std::string dir = gpt::test::scratch_dir("ckpt_val_fallback");
    for (int it : {10, 20, 30}) save(dir, it);
    on_rank0([&] { flip_byte(file_of(dir, 30), "w/a", 100); });
    LoadRequest req{dir};
    EXPECT_THROW(load_checkpoint(MPI_COMM_WORLD, req, load_and_check), DataError);
    req.fallback = true;
    LoadResult res = load_checkpoint(MPI_COMM_WORLD, req, load_and_check);
    ASSERT_EQ(res.iteration, 20);
    ASSERT_EQ(res.rejected.size(), 1u);
    EXPECT_NE(res.rejected[0].find("iter_0000030"), std::string::npos) << res.rejected[0];
    EXPECT_NE(res.rejected[0].find("checksum mismatch"), std::string::npos) << res.rejected[0];
    // The tracker now names what was loaded: a run resumed from 20 must save 30 again, not
    // skip it as "already the latest".
    EXPECT_EQ(read_tracker(dir), 20);
    if (comm_rank(MPI_COMM_WORLD) == 0) {
        ASSERT_EQ(res.notes.size(), 1u);
        EXPECT_NE(res.notes[0].find("rewrote"), std::string::npos) << res.notes[0];
    }
    on_rank0([&] { write_tracker(dir, 30); });

    req = LoadRequest{dir, 10};  // --ckpt-step 10
    EXPECT_EQ(load_checkpoint(MPI_COMM_WORLD, req, load_and_check).iteration, 10);
    req.step = 25;
    EXPECT_THROW(load_checkpoint(MPI_COMM_WORLD, req, load_and_check), IoError);
    req.fallback = true;
    EXPECT_EQ(load_checkpoint(MPI_COMM_WORLD, req, load_and_check).iteration, 20);

    // Every checkpoint damaged: fallback ends with an error listing each.
    on_rank0([&] {
        flip_byte(file_of(dir, 20), "w/a", 3);
        std::filesystem::resize_file(file_of(dir, 10), 100);
    });
    req = LoadRequest{dir, -1, true};
    try {
        load_checkpoint(MPI_COMM_WORLD, req, load_and_check);
        ADD_FAILURE() << "no checkpoint is loadable";
    } catch (const DataError& e) {
        const std::string msg = e.what();
        for (const char* it : {"iter_0000030", "iter_0000020", "iter_0000010"})
            EXPECT_NE(msg.find(it), std::string::npos) << msg;
    }
}

TEST(CkptValidation, TrackerDecidesAndItsAbsenceIsExplained) {
    const std::string dir = gpt::test::scratch_dir("ckpt_val_tracker");
    LoadRequest req{dir};
    EXPECT_FALSE(load_checkpoint(MPI_COMM_WORLD, req, load_and_check).iteration.has_value());  // fresh start
    // --load naming the --save folder of a first run, which does not exist yet.
    EXPECT_FALSE(load_checkpoint(MPI_COMM_WORLD, LoadRequest{dir + "/absent"}, load_and_check).iteration.has_value());
    on_rank0([&] { std::ofstream(dir + "/a-file") << "x"; });
    EXPECT_THROW(load_checkpoint(MPI_COMM_WORLD, LoadRequest{dir + "/a-file"}, load_and_check), IoError);
    on_rank0([&] { std::filesystem::remove(dir + "/a-file"); });
    save(dir, 10);
    save(dir, 20);
    EXPECT_EQ(read_tracker(dir), 20);
    // A folder the tracker never named (the save died between rename and tracker update).
    on_rank0([&] { std::filesystem::copy(dir + "/iter_0000020", dir + "/iter_0000040"); });
    EXPECT_EQ(load_checkpoint(MPI_COMM_WORLD, req, load_and_check).iteration, 20);
    on_rank0([&] { std::filesystem::remove(std::filesystem::path(dir) / kTrackerFile); });
    EXPECT_THROW(load_checkpoint(MPI_COMM_WORLD, req, load_and_check), IoError);
    req.fallback = true;
    LoadResult res = load_checkpoint(MPI_COMM_WORLD, req, [](CheckpointReader& r) { EXPECT_EQ(r.iteration(), 20); });
    EXPECT_EQ(res.iteration, 40);  // the folder name; the file inside says 20 (it is a copy)
    on_rank0([&] { std::ofstream(std::filesystem::path(dir) / kTrackerFile) << "garbage"; });
    req.fallback = false;
    EXPECT_THROW(load_checkpoint(MPI_COMM_WORLD, req, load_and_check), DataError);
}

TEST(CkptValidation, KeepLastRemovesOlderOnlyAfterCommit) {
    const std::string dir = gpt::test::scratch_dir("ckpt_val_keep");
    for (int it : {10, 20, 30, 40, 50}) save(dir, it, 2);
    EXPECT_EQ(list_iterations(dir), (std::vector<std::int64_t>{40, 50}));
    EXPECT_EQ(read_tracker(dir), 50);
    LoadRequest req{dir};
    EXPECT_EQ(load_checkpoint(MPI_COMM_WORLD, req, load_and_check).iteration, 50);
}

TEST(CkptValidation, AbandonedSaveLeavesThePreviousOneLoadable) {
    const std::string dir = gpt::test::scratch_dir("ckpt_val_abandon");
    save(dir, 10, 1);
    {
        CheckpointWriter w(MPI_COMM_WORLD, dir, 20);
        const Selection none = Selection::none();
        const bool root = comm_rank(MPI_COMM_WORLD) == 0;
        const auto va = to_bytes(packed_values(0, kA, Selection::all(), 20), DType::F32);
        w.write({{"w/a", kA, DType::F32, root ? Selection::all() : none, va.data()}});
        // No commit: the job "died" here.
    }
    EXPECT_EQ(read_tracker(dir), 10);
    EXPECT_EQ(list_iterations(dir), (std::vector<std::int64_t>{10}));
    EXPECT_EQ(load_checkpoint(MPI_COMM_WORLD, LoadRequest{dir}, load_and_check).iteration, 10);
    save(dir, 30, 1);  // the next save cleans up the abandoned temporary folder, keep-last the old one
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"iter_0000030", kTrackerFile}));
}

TEST(CkptValidation, DifferentTensorListsThrowOnEveryRank) {
    const std::string dir = gpt::test::scratch_dir("ckpt_val_lists");
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    if (p < 2) GTEST_SKIP() << "needs 2 ranks";
    CheckpointWriter w(MPI_COMM_WORLD, dir, 5);
    const auto va = to_bytes(packed_values(0, kA, Selection::all(), 5), DType::F32);
    // The last rank names its tensor differently: every rank must throw, none may hang.
    const std::string name = r == p - 1 ? "w/other" : "w/a";
    try {
        w.write({{name, kA, DType::F32, r == 0 ? Selection::all() : Selection::none(), va.data()}});
        ADD_FAILURE() << "no error on rank " << r;
    } catch (const InternalError& e) {
        EXPECT_NE(std::string(e.what()).find("ranks passed different tensor lists"), std::string::npos) << e.what();
    }
}

// Every rank of this test runs on one host: one rank per host flushes the file at commit.
TEST(CkptValidation, NodeLayoutOnOneHost) {
    const NodeLayout node = node_layout(MPI_COMM_WORLD);
    EXPECT_EQ(node.node_rank, comm_rank(MPI_COMM_WORLD));
    EXPECT_FALSE(node.multi_node);
}

TEST(CkptValidation, EarlyWritebackLeavesTheBytesAlone) {
    const std::string dir = gpt::test::scratch_dir("ckpt_val_writeback");
    const std::string file = dir + "/f" + std::to_string(comm_rank(MPI_COMM_WORLD)) + ".bin";
    {
        EarlyWriteback missing(dir + "/missing.bin");  // cannot open: does nothing
        missing.start(0, 4096);
    }
    std::string bytes(3 << 20, '\0');
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131);
    std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    {
        EarlyWriteback wb(file);
        wb.start(0, 1 << 20);
        wb.start(1 << 20, 1 << 20);        // adjacent: merged
        wb.start((2 << 20) + 100, 1000);   // a gap: the merged range starts, this one waits
        wb.flush();
        wb.start(bytes.size() - 10, 10);   // started by the destructor
    }
    fsync_path(file);
    std::ifstream in(file, std::ios::binary);
    const std::string back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(back, bytes);
}


// The load path's checksum worker: pieces summed on its thread add up to the checksum of
// the whole selection (so a verified load does not silently fall back to a second pass).
TEST(CkptValidation, ChecksumWorkerSumsPiecesLikeTheWhole) {
    const Shape shape{600, 3000};  // 7.2 MB of fp32: several 4 MiB pieces
    std::vector<float> data(600 * 3000);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 977) * 0.5f;
    for (const Selection& sel : {Selection::all(), Selection::box({100, 0}, {400, 3000})}) {
        const std::size_t n = static_cast<std::size_t>(sel.num_elements(shape));
        // The selected elements packed, as a read leaves them in the destination buffer.
        std::vector<unsigned char> packed;
        for_each_piece(shape, sel, 4, [&](const Selection& piece, std::size_t) {
            for (const Box& b : piece.boxes(shape))
                for_each_run(shape, b, [&](std::int64_t start, std::int64_t len) {
                    const auto* p = reinterpret_cast<const unsigned char*>(data.data() + start);
                    packed.insert(packed.end(), p, p + len * 4);
                });
        });
        ASSERT_EQ(packed.size(), n * 4);
        std::uint64_t sum = 0;
        int pieces = 0;
        {
            ChecksumWorker worker(Phase::LoadVerify);
            for_each_piece(shape, sel, 4, [&](const Selection& piece, std::size_t mem_offset) {
                worker.add(&sum, shape, piece, 4, packed.data() + mem_offset);
                ++pieces;
            });
            worker.finish();
        }
        EXPECT_GT(pieces, 1);
        EXPECT_EQ(sum, checksum_selection(shape, sel, 4, packed.data()));
        EXPECT_NE(sum, 0u);
    }
}

}  // namespace
}  // namespace gpt::ckpt
