// Wall-clock timers for the iteration line and benchmarks.
#pragma once

#include <chrono>

namespace gpt {

class Stopwatch {
public:
    Stopwatch() : start_(clock::now()) {}
    void reset() { start_ = clock::now(); }
    double seconds() const { return std::chrono::duration<double>(clock::now() - start_).count(); }

private:
    using clock = std::chrono::steady_clock;
    clock::time_point start_;
};

}  // namespace gpt
