// Paths and helpers every test may use.
#pragma once

#include <string>

namespace gpt::test {

std::string source_dir();  // repository root (GPT_TEST_SOURCE_DIR, set by CTest)
std::string binary_dir();  // build folder (GPT_TEST_BINARY_DIR)
// A fresh empty folder under the build folder, unique per test name and rank count.
std::string scratch_dir(const std::string& name);
// This process in MPI_COMM_WORLD (multi-rank tests run under mpiexec -n N).
int world_size();
int world_rank();

// Call where a test skips because this machine lacks the hardware it needs (a GPU, a GPU per
// rank), then GTEST_SKIP(). The skip is counted: when no test failed, test_main prints
// kHardwareSkipMarker, which CTest's SKIP_REGULAR_EXPRESSION turns into "skipped" for tests
// labelled gpu (cmake/GptTesting.cmake) instead of a silent pass. Under
// GPT_TEST_REQUIRE_GPU=1 (set by the emulator build, whose emulated GPU always exists) the
// missing hardware is a fatal test failure (so a fixture's SetUp stops the test there).
void note_hardware_skip(const std::string& why);
int hardware_skips();
inline constexpr const char* kHardwareSkipMarker = "GPT_TEST_HARDWARE_SKIP:";

}  // namespace gpt::test
