#include "data/mapped_file.hpp"

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
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) GPT_THROW(IoError, "cannot create '", tmp, "': ", errno_message(errno));
    const char* p = static_cast<const char*>(data);
    std::size_t left = size;
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
    int err = ::fsync(fd) != 0 ? errno : 0;
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err != 0) {
        ::unlink(tmp.c_str());
        GPT_THROW(IoError, "cannot write '", tmp, "': ", errno_message(err));
    }
}

std::string temp_name_for(const std::string& path) {
    // Unique across the hosts sharing a file system: two nodes can run the same pid.
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return path + ".tmp." + std::to_string(::getpid()) + "." + host;
}

void write_file_atomically(const std::string& path, const void* data, std::size_t size) {
    const std::string tmp = temp_name_for(path);
    write_file_durably(tmp, data, size);
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        GPT_THROW(IoError, "cannot rename '", tmp, "' to '", path, "': ", errno_message(err));
    }
    // The rename itself is durable once the folder is synced (a crash right after must not
    // bring back the old name, or no name).
    const std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/') + 1);
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

}  // namespace gpt::data
