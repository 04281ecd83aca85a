// The data paths under the checkpoint writer and reader, single process: DirectWrites and
// DirectReads with O_DIRECT (bounce buffers, in place, partial pages buffered) and through
// the page cache only.
// Every byte must land at its offset, nothing else may change, and the partial checksums
// must be those of the bytes given, whatever the alignment of file offset and memory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <vector>

#include "ckpt/aligned_writes.hpp"
#include "ckpt/checksum.hpp"
#include "ckpt/checksum_worker.hpp"
#include "ckpt/direct_reads.hpp"
#include "ckpt/direct_writes.hpp"
#include "core/errors.hpp"
#include "test_env.hpp"

namespace gpt::ckpt {
namespace {

constexpr std::size_t kPage = AlignedWrites::kAlign;
constexpr std::size_t kPiece = AlignedWrites::kPieceBytes;

struct Piece {
    std::uint64_t file_offset;
    std::size_t bytes;
    std::size_t mem_misalign;  // bytes after a page boundary where the source starts
};

// Runs that exercise each branch: inside one page, across one page boundary, a run whose
// head, middle (several bounce pieces and a partial one) and tail are all present, two
// runs meeting inside a page (as two ranks' slices do), one page-aligned in file and
// memory (written in place), and one aligned in file only (copied).
std::vector<Piece> pieces() {
    return {
        {100, 1, 0},
        {kPage - 10, 20, 3},
        {3 * kPage + 123, 2 * kPiece + 5 * kPage + 77, 5},
        {3 * kPage + 123 + 2 * kPiece + 5 * kPage + 77, 3 * kPage + 1, 0},  // meets the one before
        {3 * kPiece, kPiece + 3 * kPage, 0},                                  // in place
        {5 * kPiece, kPiece / 2, 64},                                         // file-aligned, copied
    };
}

std::vector<unsigned char> read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool file_system_has_direct_io(const std::string& path) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) return false;
    ::close(fd);
    return true;
}

void check_writes(bool direct, bool with_worker) {
    const std::string dir = test::scratch_dir(std::string("direct_writes_") + (direct ? "direct" : "buffered") +
                                              (with_worker ? "_worker" : ""));
    const std::string path = dir + "/file.bin";
    const std::size_t size = 6 * kPiece + kPage;
    std::vector<unsigned char> expect(size, 0xEE);  // what the writes must leave untouched
    {
        std::ofstream out(path, std::ios::binary);
        out.write(reinterpret_cast<const char*>(expect.data()), static_cast<std::streamsize>(size));
    }
    std::mt19937 rng(11);
    const auto ps = pieces();
    // Each source in its own page-aligned allocation, starting mem_misalign bytes in.
    std::vector<std::unique_ptr<unsigned char, decltype(&std::free)>> mem;
    DirectWrites w(path, direct);
    std::vector<std::uint64_t> sums(ps.size(), 0), want(ps.size(), 0);
    for (std::size_t i = 0; i < ps.size(); ++i) {
        const Piece& p = ps[i];
        const std::size_t alloc = (p.bytes + p.mem_misalign + kPage) / kPage * kPage;
        mem.emplace_back(static_cast<unsigned char*>(std::aligned_alloc(kPage, alloc)), &std::free);
        unsigned char* src = mem.back().get() + p.mem_misalign;
        for (std::size_t k = 0; k < p.bytes; ++k) src[k] = static_cast<unsigned char>(rng());
        std::memcpy(expect.data() + p.file_offset, src, p.bytes);
        // Entry i's dataset starts 7 bytes before its run: the checksum positions matter.
        w.add(i, p.file_offset, 7, src, p.bytes);
        want[i] = checksum_bytes(7, src, p.bytes);
    }
    std::uint64_t total = 0;
    for (const Piece& p : ps) total += p.bytes;
    ASSERT_EQ(w.pending_bytes(), total);
    if (with_worker) {
        ChecksumWorker worker(Phase::SaveChecksum);
        w.run(sums, true, {}, &worker);
        worker.finish();
    } else {
        w.run(sums, true);
    }
    EXPECT_EQ(w.direct_bytes() + w.buffered_bytes(), total);
    if (direct && file_system_has_direct_io(path)) {
        // The whole pages of the big runs went around the page cache.
        EXPECT_GE(w.direct_bytes(), 3 * kPiece) << "O_DIRECT works here, yet the writes went through the page cache";
    } else if (direct) {
        std::printf("note: %s has no O_DIRECT; checked the buffered fallback\n", dir.c_str());
    } else {
        EXPECT_EQ(w.direct_bytes(), 0u);
    }
    EXPECT_EQ(sums, want);
    const std::vector<unsigned char> got = read_file(path);
    ASSERT_EQ(got.size(), size);
    for (std::size_t k = 0; k < size; ++k)
        ASSERT_EQ(got[k], expect[k]) << "first wrong byte at file offset " << k;
}

TEST(CkptDirectIo, DirectWritesPlaceEveryByte) { check_writes(true, true); }
TEST(CkptDirectIo, DirectWritesPlaceEveryByteSummingInline) { check_writes(true, false); }
TEST(CkptDirectIo, BufferedWritesPlaceEveryByte) { check_writes(false, true); }

void check_reads(bool direct) {
    const std::string dir = test::scratch_dir(std::string("direct_reads_") + (direct ? "direct" : "buffered"));
    const std::string path = dir + "/file.bin";
    const std::size_t size = 6 * kPiece + kPage;
    std::vector<unsigned char> file(size);
    std::mt19937 rng(5);
    for (auto& b : file) b = static_cast<unsigned char>(rng());
    {
        std::ofstream out(path, std::ios::binary);
        out.write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(size));
    }
    // The writes' pieces, plus small runs close together (read as one buffered window).
    auto ps = pieces();
    for (int k = 0; k < 5; ++k) ps.push_back({5 * kPiece + kPiece / 2 + 1000 + 3000 * k, 700, 1});
    const std::string name = "t";
    DirectReads rd(path, std::uint64_t{16} << 20, direct);
    std::vector<std::vector<unsigned char>> dest(ps.size());
    std::vector<std::uint64_t> sums(ps.size(), 0), want(ps.size(), 0);
    for (std::size_t i = 0; i < ps.size(); ++i) {
        dest[i].assign(ps[i].bytes + ps[i].mem_misalign, 0);
        rd.add(i, &name, ps[i].file_offset, 7, dest[i].data() + ps[i].mem_misalign, ps[i].bytes);
        want[i] = checksum_bytes(7, file.data() + ps[i].file_offset, ps[i].bytes);
    }
    ChecksumWorker worker(Phase::LoadVerify);
    rd.run(&sums, &worker);
    worker.finish();
    for (std::size_t i = 0; i < ps.size(); ++i)
        ASSERT_TRUE(std::equal(file.begin() + ps[i].file_offset, file.begin() + ps[i].file_offset + ps[i].bytes,
                               dest[i].begin() + ps[i].mem_misalign))
            << "run " << i << " (file offset " << ps[i].file_offset << ", " << ps[i].bytes << " bytes) read wrong";
    EXPECT_EQ(sums, want);
    if (direct && file_system_has_direct_io(path))
        EXPECT_GE(rd.direct_bytes(), 3 * kPiece) << "O_DIRECT works here, yet the reads went through the page cache";
    else if (!direct)
        EXPECT_EQ(rd.direct_bytes(), 0u);

    // A file cut inside the last (page-aligned, tail-free) piece: named as truncated, not
    // read as zeros.
    ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(3 * kPiece + kPiece / 2 + 5 * kPage)), 0);
    DirectReads cut(path, std::uint64_t{16} << 20, direct);
    std::vector<unsigned char> big(kPiece);
    cut.add(0, &name, 3 * kPiece, 0, big.data(), big.size());
    EXPECT_THROW(cut.run(nullptr, nullptr), DataError);
}

TEST(CkptDirectIo, DirectReadsFetchEveryByte) { check_reads(true); }
TEST(CkptDirectIo, BufferedReadsFetchEveryByte) { check_reads(false); }

TEST(CkptDirectIo, StopRequestEndsTheRunWithAnIoError) {
    const std::string dir = test::scratch_dir("direct_writes_stop");
    const std::string path = dir + "/file.bin";
    { std::ofstream out(path, std::ios::binary); }
    std::vector<unsigned char> src(2 * kPiece, 1);
    DirectWrites w(path);
    w.add(0, 0, 0, src.data(), src.size());
    std::stop_source stop;
    stop.request_stop();
    std::vector<std::uint64_t> sums(1, 0);
    EXPECT_THROW(w.run(sums, true, stop.get_token()), IoError);
}

}  // namespace
}  // namespace gpt::ckpt
