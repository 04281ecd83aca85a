// The emulator's NVTX (the subset we call): ranges are recorded per process, in call order,
// for tests to read (gpt_emu/profiler_log.hpp) instead of going to a profiler.
#pragma once

extern "C" {
// The zero-based nesting level of the range started (as NVTX's push returns).
int nvtxRangePushA(const char* message);
// The level of the range ended; -1 when no range was open on this thread.
int nvtxRangePop(void);
}
