// check_output_paths (validate.hpp): real test writes of every output path at start-up.
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "config/validate.hpp"
#include "core/errors.hpp"
#include "core/fd_write.hpp"

namespace gpt {

namespace {

namespace fs = std::filesystem;

std::string host_name() {
    char buf[256] = {};
    ::gethostname(buf, sizeof(buf) - 1);
    return buf;
}

// `dir` exists (created if missing) and is a folder.
void require_folder(const std::string& dir, const char* flag) {
    std::error_code ec;
    if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
        GPT_THROW(UsageError, "--", flag, " ", dir, " is a file, not a folder");
    fs::create_directories(dir, ec);
    if (ec) GPT_THROW(UsageError, "--", flag, " ", dir, ": cannot create the folder: ", ec.message());
}

// Writes, fsyncs and removes a probe file: open(2) alone succeeds on a full file system,
// and a delayed-allocation file system reports ENOSPC only at write or fsync.
void probe_write(const std::string& dir, const char* flag, int rank) {
    const std::string path = dir + "/.gpt-write-probe." + host_name() + "." +
                             std::to_string(::getpid()) + "." + std::to_string(rank);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) GPT_THROW(UsageError, "--", flag, " ", dir, " is not writable: ", std::strerror(errno));
    const char block[4096] = {};
    int err = write_fully(fd, block, sizeof(block));
    if (err == 0 && ::fsync(fd) != 0 && errno != EINVAL) err = errno;
    ::close(fd);
    ::unlink(path.c_str());
    if (err != 0) GPT_THROW(UsageError, "--", flag, " ", dir, " is not writable: ", std::strerror(err));
}

void check_folder(const std::string& dir, const char* flag, int rank) {
    if (dir.empty()) return;
    require_folder(dir, flag);
    probe_write(dir, flag, rank);
}

std::string gib(std::uint64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
    return buf;
}

}  // namespace

void check_output_paths(const Config& cfg, std::uint64_t checkpoint_bytes, int rank) {
    check_folder(cfg.logging.log_dir, "log-dir", rank);
    check_folder(cfg.data.data_cache_path, "data-cache-path", rank);
    check_folder(cfg.logging.tensorboard_dir, "tensorboard-dir", rank);
    const std::string& mf = cfg.logging.metrics_file;
    if (!mf.empty()) {
        std::error_code ec;
        GPT_REQUIRE(!fs::is_directory(mf, ec), UsageError, "--metrics-file ", mf, " is a folder, not a file");
        const fs::path parent = fs::path(mf).parent_path();
        check_folder(parent.empty() ? std::string(".") : parent.string(), "metrics-file", rank);
        if (fs::exists(mf, ec) && ::access(mf.c_str(), W_OK) != 0)
            GPT_THROW(UsageError, "--metrics-file ", mf, " is not writable: ", std::strerror(errno));
    }
    const std::string& save = cfg.checkpoint.save;
    if (!save.empty()) {
        check_folder(save, "save", rank);
        struct statvfs st {};
        if (checkpoint_bytes > 0 && ::statvfs(save.c_str(), &st) == 0) {
            const std::uint64_t free = static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
            GPT_REQUIRE(free >= checkpoint_bytes, UsageError, "--save ", save, " has ", gib(free),
                        " free, but one checkpoint of this model needs about ", gib(checkpoint_bytes),
                        " (No space left on device at the first save)");
        }
    }
}

}  // namespace gpt
