// The headers nearly every test translation unit parses: GoogleTest (about 100k lines after
// preprocessing, more than half of a typical test file's), MPI and the standard library. Compiled
// once per build tree into a precompiled header that every gpt_add_test binary reuses
// (cmake/GptTesting.cmake), which roughly halves the tests' compile time on CI's 2 cores. No
// project header belongs here: a test must still name what it uses, and a project macro
// (GPT_HAVE_CUDA, the emulator's) must not be fixed at PCH time.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
