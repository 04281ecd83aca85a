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

}  // namespace gpt::test
