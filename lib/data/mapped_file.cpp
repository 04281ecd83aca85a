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
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) GPT_THROW(IoError, "cannot create '", tmp, "': ", errno_message(errno));
    for (const FilePiece& piece : pieces) {
        const char* p = static_cast<const char*>(piece.data);
        std::size_t left = piece.size;
        while (left > 0) {
            ssize_t w = ::write(fd, p, left);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                int err = w < 0 ? errno : ENOSPC;
                ::close(fd);
                ::unlink(tmp.c_str());
                GPT_THROW(IoError, "cannot write '", tmp, "': ", errno_message(err));
            }
            p += w;
            left -= static_cast<std::size_t>(w);
        }
    }
    int err = ::fsync(fd) != 0 ? errno : 0;
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err != 0) {
        ::unlink(tmp.c_str());
        GPT_THROW(IoError, "cannot write '", tmp, "': ", errno_message(err));
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
    const std::string tmp = temp_name_for(path);
    write_file_durably(tmp, pieces);
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        GPT_THROW(IoError, "cannot rename '", tmp, "' to '", path, "': ", errno_message(err));
    }
    // The folder is not fsynced: a crash may lose the rename (the old name, or none, comes
    // back), never the data under the new name, and every reader here checks what it maps
    // (an index cache found missing is rebuilt). One fsync per file, not two, matters at
    // start-up over blends of hundreds of datasets.
}

}  // namespace gpt::data
