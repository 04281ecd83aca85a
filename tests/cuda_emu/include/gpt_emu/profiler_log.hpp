// What the emulator's NVTX and profiler API were called with (tests only): one log per
// process, in call order, over all threads.
#pragma once

#include <string>
#include <vector>

namespace gpt_emu {

struct ProfilerCall {
    enum Kind { RangePush, RangePop, ProfilerStart, ProfilerStop } kind;
    std::string name;  // the range's message (RangePush; RangePop: the range it ended)
    int level = 0;     // NVTX's return value: the nesting level pushed or popped (-1: no range)
    bool main_thread = true;  // the thread that first called into this log
};

std::vector<ProfilerCall> profiler_calls();
void clear_profiler_calls();

}  // namespace gpt_emu
