// The data paths under the checkpoint writer and reader, single process: DirectWrites (with
// O_DIRECT: bounce buffers, in place, partial pages buffered) and DirectReads (whole covering
// pages with O_DIRECT: pieces, windows of small runs, verification passes; O_DIRECT refused
// at the first read; truncated files), and both through the page cache only.
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

#include "ckpt/aligned_reads.hpp"
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

std::string write_random_file(const std::string& path, std::size_t size, std::vector<unsigned char>& file) {
    file.resize(size);
    std::mt19937 rng(5);
    for (auto& b : file) b = static_cast<unsigned char>(rng());
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(size));
    return path;
}

// How the reads are made: O_DIRECT, page cache only, or O_DIRECT refused at the first read
// (EINVAL, as some file systems do: the reads must fall back to the page cache).
enum class ReadMode { Direct, Buffered, Refused };

struct RefuseDirect {
    explicit RefuseDirect(bool on) : on_(on) { AlignedReads::refuse_direct_reads_for_testing(on_); }
    ~RefuseDirect() { AlignedReads::refuse_direct_reads_for_testing(false); }
    bool on_;
};

const char* mode_name(ReadMode m) { return m == ReadMode::Direct ? "direct" : m == ReadMode::Buffered ? "buffered" : "refused"; }

// The message of the DataError `fn` throws (fails the test when there is none).
template <typename Fn>
std::string data_error(Fn&& fn) {
    try {
        fn();
    } catch (const DataError& e) {
        return e.what();
    }
    ADD_FAILURE() << "no DataError";
    return {};
}

void check_reads(ReadMode mode) {
    const std::string dir = test::scratch_dir(std::string("direct_reads_") + mode_name(mode));
    // Not a whole number of pages: the last window's covering page ends past the file.
    const std::size_t size = 6 * kPiece + kPage + 1234;
    std::vector<unsigned char> file;
    const std::string path = write_random_file(dir + "/file.bin", size, file);
    const RefuseDirect refuse(mode == ReadMode::Refused);
    // The writes' pieces, plus small runs close together (read as one window), the last of
    // them ending 3 bytes before the end of the file.
    auto ps = pieces();
    for (int k = 0; k < 5; ++k) ps.push_back({5 * kPiece + kPiece / 2 + 1000 + 3000 * k, 700, 1});
    ps.push_back({size - 3 - 900, 900, 2});
    std::vector<std::string> names;
    for (std::size_t i = 0; i < ps.size(); ++i) names.push_back("t" + std::to_string(i));
    DirectReads rd(path, std::uint64_t{16} << 20, mode != ReadMode::Buffered);
    // The same runs again, checksum only (a verification pass).
    DirectReads verify(path, std::uint64_t{16} << 20, mode != ReadMode::Buffered);
    std::vector<std::vector<unsigned char>> dest(ps.size());
    std::vector<std::uint64_t> sums(ps.size(), 0), verified(ps.size(), 0), want(ps.size(), 0);
    for (std::size_t i = 0; i < ps.size(); ++i) {
        dest[i].assign(ps[i].bytes + ps[i].mem_misalign, 0);
        rd.add(i, &names[i], ps[i].file_offset, 7, dest[i].data() + ps[i].mem_misalign, ps[i].bytes);
        // In two halves that meet: one run, as a rank's share of a dataset.
        const std::size_t half = ps[i].bytes / 2;
        verify.add(i, &names[i], ps[i].file_offset, 7, nullptr, half);
        verify.add(i, &names[i], ps[i].file_offset + half, 7 + half, nullptr, ps[i].bytes - half);
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
    verify.run(&verified, nullptr);
    EXPECT_EQ(verified, want) << "the verification pass";
    std::uint64_t total = 0;
    for (const Piece& p : ps) total += p.bytes;
    if (mode == ReadMode::Direct && file_system_has_direct_io(path)) {
        // Every byte, windows and partial pages too, went around the page cache.
        EXPECT_GE(rd.direct_bytes(), total) << "O_DIRECT works here, yet reads went through the page cache";
        EXPECT_GE(verify.direct_bytes(), total) << "O_DIRECT works here, yet the verification used the page cache";
    } else if (mode == ReadMode::Direct) {
        std::printf("note: %s has no O_DIRECT; checked the buffered fallback\n", dir.c_str());
    } else {
        EXPECT_EQ(rd.direct_bytes(), 0u);
        EXPECT_EQ(verify.direct_bytes(), 0u);
    }

    // A file cut short: named as truncated, with the dataset the end falls in, not read as
    // zeros (nor as what a bounce buffer held before). Cut inside a page-aligned piece, then
    // at an unaligned size inside a window, then inside a verification pass.
    const std::uint64_t cut_at = 3 * kPiece + kPiece / 2 + 5 * kPage;
    ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(cut_at)), 0);
    const std::string big_name = "big";
    DirectReads cut(path, std::uint64_t{16} << 20, mode != ReadMode::Buffered);
    std::vector<unsigned char> big(kPiece);
    cut.add(0, &big_name, 3 * kPiece, 0, big.data(), big.size());
    std::string msg = data_error([&] { cut.run(nullptr, nullptr); });
    EXPECT_NE(msg.find("ends inside dataset 'big' (at byte " + std::to_string(cut_at) + ")"), std::string::npos) << msg;

    const std::uint64_t window_cut = 5 * kPiece + kPiece / 2 + 1000 + 3000 * 3 + 100;  // inside run 3 of the window
    ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(window_cut)), 0);  // zeros after cut_at: not read
    DirectReads cut_window(path, std::uint64_t{16} << 20, mode != ReadMode::Buffered);
    std::vector<std::vector<unsigned char>> small(5, std::vector<unsigned char>(700));
    for (int k = 0; k < 5; ++k)
        cut_window.add(k, &names[6 + k], 5 * kPiece + kPiece / 2 + 1000 + 3000 * k, 0, small[k].data(), 700);
    msg = data_error([&] { cut_window.run(nullptr, nullptr); });
    EXPECT_NE(msg.find("ends inside dataset '" + names[9] + "' (at byte " + std::to_string(window_cut) + ")"),
              std::string::npos) << msg;

    DirectReads cut_verify(path, std::uint64_t{16} << 20, mode != ReadMode::Buffered);
    std::vector<std::uint64_t> partial(1, 0);
    cut_verify.add(0, &big_name, 4 * kPiece + 3, 0, nullptr, 2 * kPiece);  // ends past window_cut
    msg = data_error([&] { cut_verify.run(&partial, nullptr); });
    EXPECT_NE(msg.find("ends inside dataset 'big'"), std::string::npos) << msg;
}

TEST(CkptDirectIo, DirectReadsFetchEveryByte) { check_reads(ReadMode::Direct); }
TEST(CkptDirectIo, BufferedReadsFetchEveryByte) { check_reads(ReadMode::Buffered); }
TEST(CkptDirectIo, RefusedDirectReadsFallBackToThePageCache) { check_reads(ReadMode::Refused); }

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
