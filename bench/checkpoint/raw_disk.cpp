#include "raw_disk.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace gpt::bench {

namespace {

constexpr std::uint64_t kBlock = std::uint64_t{4} << 20;

// Runs one dd command and returns its MB/s from dd's own "N bytes ... copied, S s" line.
double run_dd(const std::string& args, std::uint64_t bytes) {
    const std::string cmd = "dd " + args + " bs=4M count=" + std::to_string(bytes / kBlock) + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) throw std::runtime_error("bench: cannot run " + cmd);
    char line[512];
    double seconds = -1;
    unsigned long long copied = 0;
    while (std::fgets(line, sizeof line, p)) {
        // "1056964608 bytes (1.1 GB, 1008 MiB) copied, 1.42 s, 744 MB/s"
        unsigned long long b = 0;
        if (std::sscanf(line, "%llu bytes", &b) == 1) {
            const char* c = std::strstr(line, "copied, ");
            if (c && std::sscanf(c, "copied, %lf s", &seconds) == 1) copied = b;
        }
    }
    const int rc = ::pclose(p);
    if (rc != 0 || seconds <= 0 || copied != bytes / kBlock * kBlock)
        throw std::runtime_error("bench: " + cmd + " failed or printed no timing");
    return static_cast<double>(copied) / seconds / 1e6;
}

void evict(const std::string& file) {
    const int fd = ::open(file.c_str(), O_RDONLY);
    if (fd < 0) throw std::runtime_error("bench: cannot open " + file);
    ::fdatasync(fd);
    const int rc = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
    if (rc != 0) throw std::runtime_error("bench: posix_fadvise failed on " + file);
}

}  // namespace

RawSpeed dd_write(const std::string& file, std::uint64_t bytes) {
    RawSpeed s;
    ::unlink(file.c_str());
    s.buffered = run_dd("if=/dev/zero of=" + file + " conv=fsync", bytes);
    ::unlink(file.c_str());
    s.direct = run_dd("if=/dev/zero of=" + file + " oflag=direct conv=fsync", bytes);
    return s;
}

RawSpeed dd_read(const std::string& file, std::uint64_t bytes) {
    RawSpeed s;
    evict(file);
    s.buffered = run_dd("if=" + file + " of=/dev/null", bytes);
    evict(file);
    s.direct = run_dd("if=" + file + " of=/dev/null iflag=direct", bytes);
    return s;
}

}  // namespace gpt::bench
