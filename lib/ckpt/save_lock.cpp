#include "ckpt/save_lock.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <system_error>

#include "core/errors.hpp"

namespace gpt::ckpt {

namespace {

std::string describe_self() {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    const char* job = std::getenv("SLURM_JOB_ID");
    char when[32] = {0};
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return std::string("job ") + (job ? job : "(no SLURM_JOB_ID)") + " on host " + host + ", pid " +
           std::to_string(::getpid()) + ", since " + when;
}

std::string read_all(int fd) {
    std::string out;
    char buf[512];
    ssize_t n = 0;
    off_t at = 0;
    while ((n = ::pread(fd, buf, sizeof buf, at)) > 0 && out.size() < 4096) {
        out.append(buf, static_cast<std::size_t>(n));
        at += n;
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\0')) out.pop_back();
    return out;
}

// Open-file-description locks (Linux): owned by this open file, not by the process, so
// another open() and close() of the file elsewhere in the process cannot drop it, and a
// second lock attempt from the same process conflicts as it would from another job.
// Elsewhere: classic process-owned POSIX locks.
int try_lock(int fd) {
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
#ifdef F_OFD_SETLK
    return ::fcntl(fd, F_OFD_SETLK, &fl);
#else
    return ::fcntl(fd, F_SETLK, &fl);
#endif
}

}  // namespace

SaveFolderLock::SaveFolderLock(const std::filesystem::path& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) GPT_THROW(IoError, "cannot create checkpoint folder ", dir.string(), ": ", ec.message());
    const std::filesystem::path path = dir / kLockFile;
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) GPT_THROW(IoError, "cannot open the save-folder lock ", path.string(), ": ", std::strerror(errno));
    if (try_lock(fd_) != 0) {
        const int err = errno;
        const std::string holder = read_all(fd_);
        ::close(fd_);
        fd_ = -1;
        if (err == EACCES || err == EAGAIN)
            GPT_THROW(IoError, "checkpoint folder ", dir.string(), " is in use by another job (",
                      holder.empty() ? std::string("holder unknown") : holder, "; lock file ", path.string(),
                      "). HINT: give each concurrent job its own --save folder; a lock of a job that has ended "
                      "is released by the kernel");
        GPT_THROW(IoError, "cannot lock ", path.string(), ": ", std::strerror(err),
                  " (the file system may not support fcntl locks)");
    }
    text_ = describe_self();
    const std::string line = text_ + "\n";
    // Ours now: replace the previous holder's description.
    if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
        const std::string why = std::strerror(errno);
        ::close(fd_);
        fd_ = -1;
        GPT_THROW(IoError, "cannot write the save-folder lock ", path.string(), ": ", why);
    }
}

SaveFolderLock::~SaveFolderLock() {
    if (fd_ >= 0) ::close(fd_);  // closing the open file description releases its lock
}

}  // namespace gpt::ckpt
