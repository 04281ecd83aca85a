// The host memory a checkpoint save writes from (Backend::alloc_host, the trainer's host
// copy) on the CPU backend: page-aligned whatever the size, not counted as the backend's
// device memory, filled at once by copy_to_host_async; and written with O_DIRECT in place
// (no bounce copy) where a run's file offset and memory agree within a page, as they do for
// a tensor at the start of a host-copy block stored at a page-aligned offset.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

#include "backend/backend.hpp"
#include "ckpt/aligned_writes.hpp"
#include "ckpt/checksum.hpp"
#include "ckpt/direct_writes.hpp"
#include "test_env.hpp"

namespace gpt::ckpt {
namespace {

constexpr std::size_t kPage = AlignedWrites::kAlign;
constexpr std::size_t kPiece = AlignedWrites::kPieceBytes;

bool page_aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % kPage == 0; }

TEST(CkptHostCopy, CpuHostMemoryIsPageAlignedAndLandsAtOnce) {
    static_assert(Backend::kHostAlign == AlignedWrites::kAlign, "the host copy's alignment is the direct writes'");
    auto be = make_backend("cpu", 0);
    for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, kPage - 1, kPage, 3 * kPiece + 5}) {
        auto* p = static_cast<unsigned char*>(be->alloc_host(bytes));
        ASSERT_NE(p, nullptr);
        EXPECT_TRUE(page_aligned(p)) << bytes << " bytes at " << static_cast<void*>(p);
        std::memset(p, 0x5a, bytes);  // all of it is ours
        EXPECT_EQ(be->bytes_in_use(), 0u) << "host memory counted as the backend's (device) memory";
        be->free_host(p);
    }
    EXPECT_FALSE(be->host_pinned());
    // The CPU backend's own large buffers (the model's parameters, the optimizer state) start
    // on a page too: a synchronous save writes from them without a copy.
    void* big = be->alloc(std::size_t{1} << 20);
    EXPECT_TRUE(page_aligned(big));
    // On the host the "device-to-host" copy is done when it returns; the event is complete.
    std::vector<float> host(1000, 0.0f);
    auto* dev = static_cast<float*>(big);
    for (int i = 0; i < 1000; ++i) dev[i] = static_cast<float>(i) * 0.5f;
    be->copy_to_host_async(host.data(), dev, host.size() * sizeof(float));
    auto landed = be->record_host_copies();
    EXPECT_EQ(std::memcmp(host.data(), dev, host.size() * sizeof(float)), 0);
    landed->wait();
    be->free(big);
}

bool file_system_has_direct_io(const std::string& path) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) return false;
    ::close(fd);
    return true;
}

// A run of a host-copy block at a page-aligned file offset (HDF5 puts every dataset of 1 MiB
// or more at a multiple of 1 MiB): its whole pages go to the disk from the block itself. The
// same bytes 4 bytes into the block (a tensor at an odd place in its buffer) are copied
// through the bounce buffers. Either way every byte lands.
TEST(CkptHostCopy, HostCopyIsWrittenInPlace) {
    const std::string dir = test::scratch_dir("ckpt_host_copy_in_place");
    const std::string path = dir + "/file.bin";
    const std::size_t bytes = kPiece + 3 * kPage + 100, offset = kPiece, size = offset + bytes + kPage;
    auto be = make_backend("cpu", 0);
    auto* block = static_cast<unsigned char*>(be->alloc_host(bytes + kPage));
    std::mt19937 rng(3);
    for (std::size_t k = 0; k < bytes + kPage; ++k) block[k] = static_cast<unsigned char>(rng());
    for (std::size_t shift : {std::size_t{0}, std::size_t{4}}) {
        {
            std::ofstream out(path, std::ios::binary | std::ios::trunc);
            const std::vector<char> fill(size, '\xee');
            out.write(fill.data(), static_cast<std::streamsize>(size));
        }
        DirectWrites w(path);
        w.add(0, offset, 0, block + shift, bytes);
        std::vector<std::uint64_t> sums(1, 0);
        w.run(sums, true);
        EXPECT_EQ(sums[0], checksum_bytes(0, block + shift, bytes));
        if (file_system_has_direct_io(path)) {
            EXPECT_EQ(w.direct_bytes(), bytes / kPage * kPage) << "shift " << shift;
            EXPECT_EQ(w.in_place_bytes(), shift == 0 ? bytes / kPage * kPage : 0u)
                << "shift " << shift << ": the host copy's pages were "
                << (shift == 0 ? "copied through bounce buffers" : "written in place from unaligned memory");
        } else {
            std::printf("note: %s has no O_DIRECT; checked the buffered path only\n", dir.c_str());
        }
        std::ifstream in(path, std::ios::binary);
        const std::vector<unsigned char> got{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
        ASSERT_EQ(got.size(), size);
        EXPECT_EQ(std::memcmp(got.data() + offset, block + shift, bytes), 0) << "shift " << shift;
        EXPECT_EQ(got[offset - 1], 0xee);
        EXPECT_EQ(got[offset + bytes], 0xee);
    }
    be->free_host(block);
}

}  // namespace
}  // namespace gpt::ckpt
