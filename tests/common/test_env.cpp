#include "test_env.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <mpi.h>

namespace gpt::test {

namespace {
std::string env_or(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return v ? v : fallback;
}
}  // namespace

std::string source_dir() { return env_or("GPT_TEST_SOURCE_DIR", "."); }
std::string binary_dir() { return env_or("GPT_TEST_BINARY_DIR", "."); }

std::string scratch_dir(const std::string& name) {
    int size = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    namespace fs = std::filesystem;
    fs::path p = fs::path(binary_dir()) / "test-scratch" / (name + ".np" + std::to_string(size));
    if (rank == 0) {
        fs::remove_all(p);
        fs::create_directories(p);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return p.string();
}

int world_size() {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

namespace {
int g_hardware_skips = 0;
}  // namespace

void note_hardware_skip(const std::string& why) {
    ++g_hardware_skips;
    const char* require = std::getenv("GPT_TEST_REQUIRE_GPU");
    if (require && std::string(require) == "1")
        FAIL() << "GPT_TEST_REQUIRE_GPU=1 (the emulator build) but " << why
               << ": the emulated GPU is missing (GPT_EMU_DEVICES?)";
}

int hardware_skips() { return g_hardware_skips; }

int world_rank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

}  // namespace gpt::test
