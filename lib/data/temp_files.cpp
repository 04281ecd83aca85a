#include "data/temp_files.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>

namespace gpt::data {

namespace {

constexpr int kSlots = 64;
constexpr std::size_t kPathMax = 4096;
// A slot is written only while `used` is false and published by setting it; the handler
// reads only published slots (the strings are never freed).
struct Slot {
    std::atomic<bool> used{false};
    char path[kPathMax];
};
Slot g_slots[kSlots];

extern "C" void unlink_and_die(int signum) {
    for (Slot& s : g_slots)
        if (s.used.load(std::memory_order_acquire)) ::unlink(s.path);
    ::signal(signum, SIG_DFL);
    ::raise(signum);
}

}  // namespace

void remember_temp_file(const std::string& path) {
    if (path.size() >= kPathMax) return;
    for (Slot& s : g_slots) {
        if (s.used.load(std::memory_order_acquire)) continue;
        std::memcpy(s.path, path.c_str(), path.size() + 1);
        s.used.store(true, std::memory_order_release);
        return;
    }
}

void forget_temp_file(const std::string& path) {
    for (Slot& s : g_slots)
        if (s.used.load(std::memory_order_acquire) && path == s.path) s.used.store(false, std::memory_order_release);
}

void remove_temp_files_on_signals() {
    struct sigaction sa {};
    sa.sa_handler = unlink_and_die;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &sa, nullptr);
}

namespace {

// Removes the stale temporary files in dir; final_name_end(name) says where ".tmp." follows
// the name of a final file of interest, npos when the entry is not one of its temporaries.
template <typename FinalNameEnd>
void remove_stale(const std::filesystem::path& dir, FinalNameEnd&& final_name_end) {
    namespace fs = std::filesystem;
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        const std::size_t tmp = final_name_end(name);
        if (tmp == std::string::npos) continue;
        char* end = nullptr;
        const char* digits = name.c_str() + tmp + 5;
        const long pid = std::strtol(digits, &end, 10);
        if (pid <= 0 || end == digits) continue;
        // "<pid>-<n>.<host>" (temp_name_for): another host's pid says nothing here, so its
        // files stay; "<pid>" alone is the older form, written on this host.
        if (*end == '-') {
            ++end;
            while (*end >= '0' && *end <= '9') ++end;
            if (*end != '.' || std::string(end + 1) != host) continue;
        } else if (*end != '\0') {
            continue;
        }
        // Alive (or not ours to signal, EPERM): leave it; a dead writer's file goes.
        if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
        fs::remove(e.path(), ec);
    }
}

}  // namespace

void remove_stale_temp_files(const std::string& final_path) {
    namespace fs = std::filesystem;
    const fs::path p(final_path);
    const std::string prefix = p.filename().string() + ".tmp.";
    remove_stale(p.parent_path().empty() ? fs::path(".") : p.parent_path(), [&](const std::string& name) {
        return name.starts_with(prefix) ? prefix.size() - 5 : std::string::npos;
    });
}

void remove_stale_temp_files_in(const std::string& dir, const std::string& suffix) {
    remove_stale(dir, [&](const std::string& name) {
        const std::size_t tmp = name.find(".tmp.");
        return tmp != std::string::npos && std::string_view(name).substr(0, tmp).ends_with(suffix) ? tmp
                                                                                                  : std::string::npos;
    });
}

}  // namespace gpt::data
