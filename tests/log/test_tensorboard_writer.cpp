// TFRecord framing and the hand-encoded Event protobufs, byte for byte against encodings
// written out from the schema; the event file's name, its first record and its failures.
// (tests/app/tensorboard_test.sh reads a training run's file back with Python's protobuf.)
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include "core/errors.hpp"
#include "log/crc32c.hpp"
#include "log/tensorboard_writer.hpp"

namespace fs = std::filesystem;
using namespace gpt::log;

namespace {

std::string bytes(std::initializer_list<int> b) {
    std::string s;
    for (int x : b) s.push_back(static_cast<char>(x));
    return s;
}

std::uint32_t u32_at(const std::string& s, std::size_t at) {
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
    return v;
}

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

fs::path scratch(const std::string& name) {
    fs::path p = fs::temp_directory_path() / ("gpt_test_tb_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(p);
    return p;
}

}  // namespace

TEST(TfRecord, FramesLengthPayloadAndMaskedCrcs) {
    const std::string payload = "abc";
    const std::string r = tfrecord(payload);
    ASSERT_EQ(r.size(), 8u + 4u + 3u + 4u);
    EXPECT_EQ(r.substr(0, 8), bytes({3, 0, 0, 0, 0, 0, 0, 0}));  // u64 little-endian
    EXPECT_EQ(u32_at(r, 8), mask_crc32c(crc32c(r.data(), 8)));
    EXPECT_EQ(r.substr(12, 3), payload);
    EXPECT_EQ(u32_at(r, 15), mask_crc32c(crc32c("abc", 3)));
    // The masked (not the plain) CRC: a reader checking TFRecord's format rejects the plain one.
    EXPECT_NE(u32_at(r, 15), crc32c("abc", 3));
}

TEST(TfRecord, FileVersionEventBytes) {
    // Event{wall_time = 2.0 (field 1, fixed64), file_version = "brain.Event:2" (field 3)}
    std::string want = bytes({0x09, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x1A, 13});
    want += "brain.Event:2";
    EXPECT_EQ(file_version_event(2.0), want);
}

TEST(TfRecord, ScalarEventBytes) {
    // Event{wall_time = 1.5, step = 3 (field 2, varint), summary (field 5) =
    //   Summary{value (field 1) = Value{tag = "a" (field 1), simple_value = 2.0f (field 2, fixed32)}}}
    const std::string want = bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F,  // 1.5 little-endian
                                    0x10, 0x03,                         // step
                                    0x2A, 0x0A,                         // summary, 10 bytes
                                    0x0A, 0x08,                         // value, 8 bytes
                                    0x0A, 0x01, 'a',                    // tag
                                    0x15, 0, 0, 0, 0x40});              // 2.0f
    EXPECT_EQ(scalar_event(1.5, 3, "a", 2.0f), want);
    // A step past one varint byte: 300 = 0xAC 0x02.
    const std::string big = scalar_event(1.5, 300, "a", 2.0f);
    EXPECT_EQ(big.substr(9, 3), bytes({0x10, 0xAC, 0x02}));
    // proto3's canonical form, as TensorBoard's writers give it: a value of +0.0 and a step
    // of 0 are left out (a zero count of --log-num-zeros-in-grad); -0.0 is not the default.
    const std::string zero = bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F,  // 1.5, no step
                                    0x2A, 0x05, 0x0A, 0x03, 0x0A, 0x01, 'a'});
    EXPECT_EQ(scalar_event(1.5, 0, "a", 0.0f), zero);
    EXPECT_EQ(scalar_event(1.5, 0, "a", -0.0f).substr(zero.size() - 3), bytes({0x0A, 0x01, 'a', 0x15, 0, 0, 0, 0x80}));
}

TEST(TensorboardWriter, NewFileNamedForTensorBoardStartingWithFileVersion) {
    const fs::path dir = scratch("name") / "sub";  // created when missing
    std::string first, second;
    {
        TensorboardWriter w(dir.string());
        TensorboardWriter w2(dir.string());  // a restart in the same second gets its own file
        first = w.path();
        second = w2.path();
        w.add_scalar("lm loss", 2.5, 7);
        w.flush();
        // Flushed: the bytes are in the file while the writer is still open.
        const std::string data = read_all(first);
        const std::string head = tfrecord(file_version_event(0.0));
        ASSERT_GT(data.size(), head.size());
        const std::uint64_t len0 = static_cast<unsigned char>(data[0]);
        EXPECT_EQ(len0, file_version_event(0.0).size());
        EXPECT_NE(data.find("brain.Event:2"), std::string::npos);
        EXPECT_NE(data.find("lm loss"), std::string::npos);
    }
    EXPECT_NE(first, second);
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    const std::regex name("events\\.out\\.tfevents\\.[0-9]{10}\\." + std::string(host) + "\\." +
                          std::to_string(::getpid()) + "\\.[0-9]+");
    EXPECT_TRUE(std::regex_match(fs::path(first).filename().string(), name)) << first;
    fs::remove_all(dir.parent_path());
}

TEST(TensorboardWriter, UnusableFolderIsOneIoError) {
    const fs::path f = scratch("file");
    std::ofstream(f.string()) << "not a folder";
    try {
        TensorboardWriter w(f.string());
        FAIL() << "no error for a file as --tensorboard-dir";
    } catch (const gpt::IoError& e) {
        EXPECT_NE(std::string(e.what()).find(f.string()), std::string::npos) << e.what();
    }
    fs::remove(f);
}
