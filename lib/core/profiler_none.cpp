// Builds without the real CUDA runtime have no profiler to start (see profiler.hpp).
#include "core/errors.hpp"
#include "core/profiler.hpp"

namespace gpt::profiler {

bool available() { return false; }
void start() { GPT_THROW(InternalError, "profiler::start in a build without the CUDA profiler"); }
void stop() { GPT_THROW(InternalError, "profiler::stop in a build without the CUDA profiler"); }

}  // namespace gpt::profiler
