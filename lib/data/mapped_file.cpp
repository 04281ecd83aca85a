#include "data/mapped_file.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/errors.hpp"

namespace gpt::data {

std::string errno_message(int err) { return std::strerror(err); }

MappedFile::MappedFile(const std::string& path) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) GPT_THROW(IoError, "cannot open '", path, "': ", errno_message(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        int err = errno;
        ::close(fd);
        GPT_THROW(IoError, "cannot stat '", path, "': ", errno_message(err));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        GPT_THROW(IoError, "'", path, "' is not a regular file");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            int err = errno;
            ::close(fd);
            GPT_THROW(IoError, "cannot map '", path, "': ", errno_message(err));
        }
        data_ = static_cast<const unsigned char*>(p);
    }
    ::close(fd);  // the mapping keeps the file alive
}

MappedFile::~MappedFile() {
    if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& o) noexcept : path_(std::move(o.path_)), data_(o.data_), size_(o.size_) {
    o.data_ = nullptr;
    o.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
    if (this != &o) {
        if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
        path_ = std::move(o.path_);
        data_ = o.data_;
        size_ = o.size_;
        o.data_ = nullptr;
        o.size_ = 0;
    }
    return *this;
}

void write_file_durably(const std::string& tmp, const void* data, std::size_t size) {
    write_file_durably(tmp, std::vector<FilePiece>{{data, size}});
}

void write_file_durably(const std::string& tmp, const std::vector<FilePiece>& pieces) {
    DurableFileWriter out(tmp);
    for (const FilePiece& piece : pieces) out.append(piece.data, piece.size);
    out.commit();
}

DurableFileWriter::DurableFileWriter(std::string tmp) : tmp_(std::move(tmp)) {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) GPT_THROW(IoError, "cannot create '", tmp_, "': ", errno_message(errno));
}

DurableFileWriter::~DurableFileWriter() {
    if (fd_ >= 0) {
        ::close(fd_);
        ::unlink(tmp_.c_str());
    }
}

void DurableFileWriter::fail(const char* what, int err) {
    ::close(fd_);
    fd_ = -1;
    ::unlink(tmp_.c_str());
    GPT_THROW(IoError, "cannot ", what, " '", tmp_, "': ", errno_message(err));
}

void DurableFileWriter::append(const void* data, std::size_t size) {
    GPT_ASSERT(fd_ >= 0, "append to a committed file");
    const char* p = static_cast<const char*>(data);
    std::size_t left = size;
    while (left > 0) {
        ssize_t w = ::write(fd_, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) fail("write", w < 0 ? errno : ENOSPC);
        p += w;
        left -= static_cast<std::size_t>(w);
    }
    // Only a hint to start writing back now (the fsync in commit() is what makes it durable
    // and reports errors); file systems without it (EINVAL, ENOSYS) write back at the fsync.
    if (size >= (1u << 20))
        (void)::sync_file_range(fd_, static_cast<off_t>(written_), static_cast<off_t>(size), SYNC_FILE_RANGE_WRITE);
    written_ += size;
}

void DurableFileWriter::commit(const std::string& path) {
    GPT_ASSERT(fd_ >= 0, "file committed twice");
    if (::fsync(fd_) != 0) fail("write", errno);
    const int closed = ::close(fd_);
    fd_ = -1;
    if (closed != 0) {
        const int err = errno;
        ::unlink(tmp_.c_str());
        GPT_THROW(IoError, "cannot write '", tmp_, "': ", errno_message(err));
    }
    if (path.empty()) return;
    if (::rename(tmp_.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp_.c_str());
        GPT_THROW(IoError, "cannot rename '", tmp_, "' to '", path, "': ", errno_message(err));
    }
}

std::string temp_name_for(const std::string& path) {
    // Unique across the hosts sharing a file system (two nodes can run the same pid) and the
    // threads of this process (index caches are built on several).
    static std::atomic<unsigned> counter{0};
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return path + ".tmp." + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "." + host;
}

void write_file_atomically(const std::string& path, const void* data, std::size_t size) {
    write_file_atomically(path, std::vector<FilePiece>{{data, size}});
}

void write_file_atomically(const std::string& path, const std::vector<FilePiece>& pieces) {
    DurableFileWriter out(temp_name_for(path));
    for (const FilePiece& piece : pieces) out.append(piece.data, piece.size);
    out.commit(path);
    // The folder is not fsynced: a crash may lose the rename (the old name, or none, comes
    // back), never the data under the new name, and every reader here checks what it maps
    // (an index cache found missing is rebuilt). One fsync per file, not two, matters at
    // start-up over blends of hundreds of datasets.
}

}  // namespace gpt::data
