#include "hf/folder_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/errors.hpp"

namespace gpt::hf {

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    GPT_REQUIRE(in, IoError, "cannot open ", path, ": ", std::strerror(errno));
    std::ostringstream all;
    all << in.rdbuf();
    GPT_REQUIRE(!in.bad(), IoError, "cannot read ", path);
    return all.str();
}

void write_model_file(const StagingDir& out, const std::vector<NamedTensor>& tensors) {
    const std::string p = out.path() + "/model.safetensors";
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    GPT_REQUIRE(fd >= 0, IoError, "cannot create ", p, ": ", std::strerror(errno));
    try {
        write_safetensors(fd, p, tensors);
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
}

}  // namespace gpt::hf
