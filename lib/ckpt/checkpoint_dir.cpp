#include "ckpt/checkpoint_dir.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>

#include "core/errors.hpp"

namespace gpt::ckpt {

namespace {
std::string errno_text() { return std::strerror(errno); }

bool parse_iteration_dir(const std::string& name, std::int64_t& it) {
    static const std::regex re("iter_([0-9]{7,})");
    std::smatch m;
    if (!std::regex_match(name, m, re)) return false;
    it = std::stoll(m[1].str());
    return true;
}
}  // namespace

std::string iteration_dir_name(std::int64_t iteration) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "iter_%07lld", static_cast<long long>(iteration));
    return buf;
}

fs::path checkpoint_file(const fs::path& root, std::int64_t iteration) {
    return root / iteration_dir_name(iteration) / kCheckpointFile;
}

fs::path temp_dir(const fs::path& root, std::int64_t iteration, const std::string& tag) {
    return root / (iteration_dir_name(iteration) + ".tmp-" + tag);
}

std::optional<std::int64_t> read_tracker(const fs::path& root) {
    const fs::path p = root / kTrackerFile;
    std::ifstream in(p);
    if (!in) {
        if (!fs::exists(p)) return std::nullopt;
        GPT_THROW(IoError, "cannot read checkpoint tracker ", p.string());
    }
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Strict: decimal digits, then only blanks or line ends (write_tracker's "200\n",
    // Megatron's "200", a user's echo). strtoll alone would read a file of NUL bytes (a
    // crash on some file systems leaves one) as iteration 0, and "12abc" as 12.
    std::string digits = text;
    while (!digits.empty() && std::strchr(" \t\r\n", digits.back()) != nullptr && digits.back() != '\0')
        digits.pop_back();
    const bool ok = !digits.empty() && digits.size() <= 18 &&
                    std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if (!ok) {
        std::string shown;  // printable, so NUL bytes or binary garbage show up as such
        for (unsigned char ch : text.substr(0, 40)) {
            if (ch >= 0x20 && ch < 0x7f) shown += static_cast<char>(ch);
            else {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\x%02x", ch);
                shown += buf;
            }
        }
        GPT_THROW(DataError, "checkpoint tracker ", p.string(), " holds '", shown, "' (", text.size(),
                  " bytes), not an iteration number. HINT: write the iteration of a complete checkpoint into"
                  " it, load one with --ckpt-step, or pass --load-fallback (which loads the newest good one"
                  " and rewrites the tracker)");
    }
    const std::int64_t v = std::stoll(digits);
    return v;
}

std::optional<std::int64_t> read_tracker_if_valid(const fs::path& root) {
    try {
        return read_tracker(root);
    } catch (const Error&) {
        return std::nullopt;
    }
}

void fsync_path(const fs::path& p) {
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) GPT_THROW(IoError, "cannot open ", p.string(), " to flush it: ", errno_text());
    // EINVAL: the file system cannot sync a folder; its rename is then as durable as it gets.
    if (::fsync(fd) != 0 && errno != EINVAL) {
        const std::string err = errno_text();
        ::close(fd);
        GPT_THROW(IoError, "fsync of ", p.string(), " failed: ", err);
    }
    ::close(fd);
}

EarlyWriteback::EarlyWriteback(const fs::path& file) {
#ifdef __linux__
    // Read-only is enough: sync_file_range acts on the file's page cache, not on this fd.
    fd_ = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
#else
    (void)file;
#endif
}

EarlyWriteback::~EarlyWriteback() {
    flush();
    if (fd_ >= 0) ::close(fd_);
}

void EarlyWriteback::start(std::uint64_t offset, std::uint64_t bytes) {
    if (fd_ < 0 || bytes == 0) return;
    if (pending_bytes_ > 0 && offset == pending_offset_ + pending_bytes_) {
        pending_bytes_ += bytes;
    } else {
        flush();
        pending_offset_ = offset;
        pending_bytes_ = bytes;
    }
    if (pending_bytes_ >= kBatchBytes) flush();
}

void EarlyWriteback::flush() {
#ifdef __linux__
    // Errors (EIO, ENOSPC) come back from the final fsync, which the save checks.
    if (fd_ >= 0 && pending_bytes_ > 0)
        (void)::sync_file_range(fd_, static_cast<off64_t>(pending_offset_), static_cast<off64_t>(pending_bytes_),
                                SYNC_FILE_RANGE_WRITE);
#endif
    pending_bytes_ = 0;
}

void write_tracker(const fs::path& root, std::int64_t iteration) {
    const fs::path final_path = root / kTrackerFile;
    const fs::path tmp = root / (std::string(kTrackerFile) + ".tmp-" + std::to_string(::getpid()));
    {
        int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) GPT_THROW(IoError, "cannot create ", tmp.string(), ": ", errno_text());
        const std::string text = std::to_string(iteration) + "\n";
        const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                        ::fsync(fd) == 0;
        const std::string err = errno_text();
        ::close(fd);
        if (!ok) GPT_THROW(IoError, "cannot write ", tmp.string(), ": ", err);
    }
    if (::rename(tmp.c_str(), final_path.c_str()) != 0)
        GPT_THROW(IoError, "cannot rename ", tmp.string(), " to ", final_path.string(), ": ", errno_text());
    fsync_path(root);
}

std::vector<std::int64_t> list_iterations(const fs::path& root) {
    std::vector<std::int64_t> its;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(root, ec)) {
        std::int64_t it = 0;
        if (entry.is_directory() && parse_iteration_dir(entry.path().filename().string(), it))
            its.push_back(it);
    }
    if (ec && ec != std::errc::no_such_file_or_directory)
        GPT_THROW(IoError, "cannot list checkpoint folder ", root.string(), ": ", ec.message());
    std::sort(its.begin(), its.end());
    return its;
}

void publish_dir(const fs::path& temp, const fs::path& final_dir) {
    std::error_code ec;
    fs::path aside;
    if (fs::exists(final_dir, ec)) {
        aside = final_dir;
        aside += ".old-" + std::to_string(::getpid());
        if (::rename(final_dir.c_str(), aside.c_str()) != 0)
            GPT_THROW(IoError, "cannot move the existing ", final_dir.string(), " aside: ", errno_text());
    }
    if (::rename(temp.c_str(), final_dir.c_str()) != 0)
        GPT_THROW(IoError, "cannot rename ", temp.string(), " to ", final_dir.string(), ": ", errno_text());
    fsync_path(final_dir.parent_path());
    if (!aside.empty()) {
        fs::remove_all(aside, ec);
        if (ec) GPT_THROW(IoError, "cannot remove the replaced ", aside.string(), ": ", ec.message());
    }
}

std::vector<fs::path> remove_stale_temp_dirs(const fs::path& root, const fs::path& keep) {
    static const std::regex re("(iter_[0-9]{7,}\\.(tmp|old)|latest_checkpointed_iteration\\.txt\\.tmp)-.*");
    std::vector<fs::path> removed;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(root, ec)) {
        const std::string name = entry.path().filename().string();
        if (entry.path() == keep || !std::regex_match(name, re)) continue;
        fs::remove_all(entry.path(), ec);
        if (ec) GPT_THROW(IoError, "cannot remove the leftover of an unfinished save ", entry.path().string(), ": ", ec.message());
        removed.push_back(entry.path());
    }
    return removed;
}

std::vector<std::int64_t> apply_retention(const fs::path& root, std::int64_t committed, int keep_last) {
    std::vector<std::int64_t> removed;
    if (keep_last <= 0) return removed;
    std::vector<std::int64_t> its = list_iterations(root);
    its.erase(std::remove_if(its.begin(), its.end(), [&](std::int64_t i) { return i > committed; }), its.end());
    if (static_cast<int>(its.size()) <= keep_last) return removed;
    for (std::size_t i = 0; i + keep_last < its.size(); ++i) {
        const fs::path dir = root / iteration_dir_name(its[i]);
        std::error_code ec;
        fs::remove_all(dir, ec);
        if (ec) GPT_THROW(IoError, "cannot remove old checkpoint ", dir.string(), ": ", ec.message());
        removed.push_back(its[i]);
    }
    return removed;
}

}  // namespace gpt::ckpt
