// Paths and helpers every test may use.
#pragma once

#include <string>

namespace gpt::test {

std::string source_dir();  // repository root (GPT_TEST_SOURCE_DIR, set by CTest)
std::string binary_dir();  // build folder (GPT_TEST_BINARY_DIR)
// A fresh empty folder under the build folder, unique per test name and rank count.
std::string scratch_dir(const std::string& name);

}  // namespace gpt::test
