#include "hf/staging_dir.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/errors.hpp"
#include "core/fd_write.hpp"

namespace gpt::hf {

namespace fs = std::filesystem;

namespace {

void fsync_path(const std::string& p, bool dir) {
    const int fd = ::open(p.c_str(), (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
    GPT_REQUIRE(fd >= 0, IoError, "cannot open ", p, " to sync it: ", std::strerror(errno));
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    GPT_REQUIRE(rc == 0, IoError, "cannot sync ", p, ": ", std::strerror(err));
}

// Staging folders "<final>.tmp.<pid>" whose process is gone (killed outright).
void remove_stale(const fs::path& final_path) {
    std::error_code ec;
    const fs::path parent = final_path.has_parent_path() ? final_path.parent_path() : fs::path(".");
    const std::string stem = final_path.filename().string() + ".tmp.";
    for (const auto& e : fs::directory_iterator(parent, ec)) {
        const std::string n = e.path().filename().string();
        if (n.rfind(stem, 0) != 0) continue;
        const std::string pid_text = n.substr(stem.size());
        if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
        const long pid = std::stol(pid_text);
        if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ec);
    }
}

}  // namespace

StagingDir::StagingDir(std::string final_path) : final_(std::move(final_path)) {
    while (final_.size() > 1 && final_.back() == '/') final_.pop_back();
    GPT_REQUIRE(!final_.empty(), UsageError, "the output folder is empty");
    std::error_code ec;
    GPT_REQUIRE(!fs::exists(final_, ec), UsageError, final_, " already exists: refusing to overwrite it (give a new folder)");
    remove_stale(final_);
    staging_ = final_ + ".tmp." + std::to_string(::getpid());
    fs::remove_all(staging_, ec);
    fs::create_directories(staging_, ec);
    GPT_REQUIRE(!ec, IoError, "cannot create ", staging_, ": ", ec.message());
}

StagingDir::~StagingDir() {
    if (published_) return;
    std::error_code ec;
    fs::remove_all(staging_, ec);
}

void StagingDir::write_file(const std::string& name, std::string_view bytes) const {
    const std::string p = staging_ + "/" + name;
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    GPT_REQUIRE(fd >= 0, IoError, "cannot create ", p, ": ", std::strerror(errno));
    const int err = write_fully(fd, bytes.data(), bytes.size());
    const int sync = err == 0 ? ::fsync(fd) : 0;
    const int sync_err = errno;
    ::close(fd);
    GPT_REQUIRE(err == 0, IoError, "cannot write ", p, ": ", std::strerror(err));
    GPT_REQUIRE(sync == 0, IoError, "cannot sync ", p, ": ", std::strerror(sync_err));
}

void StagingDir::copy_file(const std::string& source, const std::string& name) const {
    std::ifstream in(source, std::ios::binary);
    GPT_REQUIRE(in, IoError, "cannot open ", source, ": ", std::strerror(errno));
    std::ostringstream all;
    all << in.rdbuf();
    GPT_REQUIRE(!in.bad(), IoError, "cannot read ", source);
    write_file(name, all.str());
}

void StagingDir::publish() {
    // Files written by others (the checkpoint writer) are synced here too.
    for (const auto& e : fs::recursive_directory_iterator(staging_))
        fsync_path(e.path().string(), e.is_directory());
    fsync_path(staging_, true);
    std::error_code ec;
    GPT_REQUIRE(!fs::exists(final_, ec), IoError, final_, " appeared while converting: not overwriting it");
    fs::rename(staging_, final_, ec);
    GPT_REQUIRE(!ec, IoError, "cannot rename ", staging_, " to ", final_, ": ", ec.message());
    published_ = true;
    const fs::path parent = fs::path(final_).has_parent_path() ? fs::path(final_).parent_path() : fs::path(".");
    fsync_path(parent.string(), true);
}

}  // namespace gpt::hf
