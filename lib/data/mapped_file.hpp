// Read-only memory map of a whole file (POSIX mmap), plus the write-to-temporary-then-rename
// helper every writer of this folder uses so readers never see half-written files.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace gpt::data {

class MappedFile {
public:
    MappedFile() = default;
    explicit MappedFile(const std::string& path);  // IoError when missing/unreadable
    ~MappedFile();
    MappedFile(MappedFile&& o) noexcept;
    MappedFile& operator=(MappedFile&& o) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const unsigned char* data() const { return data_; }
    std::size_t size() const { return size_; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
    const unsigned char* data_ = nullptr;
    std::size_t size_ = 0;
};

// A fresh temporary name for path: "<path>.tmp.<pid>-<n>.<host>", unique across the hosts
// that share a file system and the threads of this process.
std::string temp_name_for(const std::string& path);
// Writes bytes to path atomically: to temp_name_for(path), then fsync and rename. Any failure throws IoError naming path and errno's message, and removes the
// temporary file.
void write_file_atomically(const std::string& path, const void* data, std::size_t size);
// The same for a file made of several pieces, written in order (no copy into one buffer).
struct FilePiece {
    const void* data;
    std::size_t size;
};
void write_file_atomically(const std::string& path, const std::vector<FilePiece>& pieces);
// Writes and fsyncs `tmp` (no rename); on failure removes it and throws IoError.
void write_file_durably(const std::string& tmp, const void* data, std::size_t size);
void write_file_durably(const std::string& tmp, const std::vector<FilePiece>& pieces);

// A file written in pieces as they become ready, under `tmp`: each append also starts the
// disk write of what it wrote (sync_file_range), so a writer that computes its next piece
// meanwhile overlaps the two, and the closing fsync waits only for the tail. commit() fsyncs
// and, when `path` is given, renames tmp to it. Destroyed uncommitted (an exception), it
// removes tmp. Failures throw IoError naming tmp and errno's message.
class DurableFileWriter {
public:
    explicit DurableFileWriter(std::string tmp);
    ~DurableFileWriter();
    DurableFileWriter(const DurableFileWriter&) = delete;
    DurableFileWriter& operator=(const DurableFileWriter&) = delete;
    void append(const void* data, std::size_t size);
    void commit(const std::string& path = "");

private:
    [[noreturn]] void fail(const char* what, int err);
    std::string tmp_;
    int fd_ = -1;
    std::size_t written_ = 0;
};

// The errno message for error reports.
std::string errno_message(int err);

}  // namespace gpt::data
