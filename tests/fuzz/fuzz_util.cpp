#include "fuzz_util.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

namespace gpt::fuzz {

namespace {
std::string make_scratch() {
    const char* tmp = std::getenv("TMPDIR");
    std::string base = (tmp && *tmp) ? tmp : "/tmp";
    // /dev/shm keeps the per-input file writes off the disk when it exists.
    if (!tmp && std::filesystem::is_directory("/dev/shm")) base = "/dev/shm";
    std::string templ = base + "/gpt-fuzz-XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) {
        std::perror("mkdtemp");
        std::abort();
    }
    return buf.data();
}

void remove_scratch();
// Never destroyed: the exit handler that removes the folder still needs the name.
const std::string& scratch_path() {
    static const std::string* dir = [] {
        auto* d = new std::string(make_scratch());
        std::atexit(remove_scratch);
        return d;
    }();
    return *dir;
}
void remove_scratch() {
    std::error_code ec;
    std::filesystem::remove_all(scratch_path(), ec);
}
}  // namespace

const std::string& scratch_dir() { return scratch_path(); }

void write_file(const std::string& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
        std::fprintf(stderr, "fuzz harness: cannot write %s\n", path.c_str());
        std::abort();
    }
}

void fail(const std::string& why) {
    std::fprintf(stderr, "fuzz oracle failed: %s\n", why.c_str());
    std::fflush(stderr);
    std::abort();
}

}  // namespace gpt::fuzz
