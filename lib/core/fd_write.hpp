// write(2) until everything is written: a signal or a pipe can cut a write short.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace gpt {

// Returns 0, or the errno of the failed write (ENOSPC when the kernel wrote nothing).
inline int write_fully(int fd, const void* data, std::size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
        const ssize_t w = ::write(fd, p, size);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return errno;
        if (w == 0) return ENOSPC;
        p += w;
        size -= static_cast<std::size_t>(w);
    }
    return 0;
}

}  // namespace gpt
