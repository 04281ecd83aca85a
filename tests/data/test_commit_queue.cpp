// CommitQueue (data/commit_queue.hpp): files committed on its threads are in place, whole,
// once finish() returns; a commit that fails leaves nothing behind and is not reported done.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "data/commit_queue.hpp"
#include "data/mapped_file.hpp"
#include "test_env.hpp"

namespace fs = std::filesystem;
using gpt::data::CommitQueue;
using gpt::data::DurableFileWriter;

namespace {

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

std::unique_ptr<DurableFileWriter> written(const std::string& tmp, const std::string& text) {
    auto file = std::make_unique<DurableFileWriter>(tmp);
    file->append(text.data(), text.size());
    return file;
}

}  // namespace

// More files than threads and waiting places, so add() has to wait for free places.
TEST(CommitQueue, EveryFileIsInPlaceAndReportedWhenFinishReturns) {
    const std::string dir = gpt::test::scratch_dir("commit_queue_many");
    constexpr int kFiles = 40;
    std::vector<int> done(kFiles, 0);
    {
        CommitQueue queue(2);
        for (int i = 0; i < kFiles; ++i) {
            const std::string path = dir + "/f" + std::to_string(i);
            queue.add(written(gpt::data::temp_name_for(path), "file " + std::to_string(i)), path,
                      [&done, i] { ++done[static_cast<std::size_t>(i)]; });
        }
        queue.finish();
        for (int i = 0; i < kFiles; ++i) {
            EXPECT_EQ(done[static_cast<std::size_t>(i)], 1) << i;
            EXPECT_EQ(read_all(dir + "/f" + std::to_string(i)), "file " + std::to_string(i));
        }
    }
    // Nothing but the files: no temporaries left.
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), kFiles);
}

// A rename into a folder that does not exist fails: its temporary is removed, on_done is not
// called, and the other files still arrive.
TEST(CommitQueue, AFailedCommitIsDroppedWithItsTemporary) {
    const std::string dir = gpt::test::scratch_dir("commit_queue_fail");
    std::atomic<int> done{0};
    bool bad_done = false;
    {
        CommitQueue queue(2);
        queue.add(written(dir + "/good.tmp", "good"), dir + "/good", [&] { ++done; });
        queue.add(written(dir + "/bad.tmp", "bad"), dir + "/no such folder/bad", [&] { bad_done = true; });
        queue.add(written(dir + "/also.tmp", "also"), dir + "/also", [&] { ++done; });
    }  // the destructor finishes
    EXPECT_EQ(done.load(), 2);
    EXPECT_FALSE(bad_done);
    EXPECT_EQ(read_all(dir + "/good"), "good");
    EXPECT_EQ(read_all(dir + "/also"), "also");
    EXPECT_FALSE(fs::exists(dir + "/bad.tmp"));
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 2);
}
