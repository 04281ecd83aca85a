// NVTX ranges and cudaProfilerStart/Stop for the emulator: each call is appended to a
// process-wide log (gpt_emu/profiler_log.hpp); ranges nest per thread, as NVTX's do.
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <cuda_profiler_api.h>
#include <nvtx3/nvToolsExt.h>

#include "gpt_emu/profiler_log.hpp"

namespace {
std::mutex g_mu;
std::vector<gpt_emu::ProfilerCall> g_calls;
std::thread::id g_first;
bool g_have_first = false;
thread_local std::vector<std::string> t_ranges;

void record(gpt_emu::ProfilerCall c) {
    std::lock_guard lock(g_mu);
    if (!g_have_first) {
        g_first = std::this_thread::get_id();
        g_have_first = true;
    }
    c.main_thread = std::this_thread::get_id() == g_first;
    g_calls.push_back(std::move(c));
}
}  // namespace

extern "C" int nvtxRangePushA(const char* message) {
    const int level = static_cast<int>(t_ranges.size());
    t_ranges.emplace_back(message ? message : "");
    record({gpt_emu::ProfilerCall::RangePush, t_ranges.back(), level});
    return level;
}

extern "C" int nvtxRangePop(void) {
    if (t_ranges.empty()) {
        record({gpt_emu::ProfilerCall::RangePop, "", -1});
        return -1;
    }
    std::string name = std::move(t_ranges.back());
    t_ranges.pop_back();
    const int level = static_cast<int>(t_ranges.size());
    record({gpt_emu::ProfilerCall::RangePop, std::move(name), level});
    return level;
}

cudaError_t cudaProfilerStart(void) {
    record({gpt_emu::ProfilerCall::ProfilerStart, "", 0});
    return cudaSuccess;
}

cudaError_t cudaProfilerStop(void) {
    record({gpt_emu::ProfilerCall::ProfilerStop, "", 0});
    return cudaSuccess;
}

namespace gpt_emu {

std::vector<ProfilerCall> profiler_calls() {
    std::lock_guard lock(g_mu);
    return g_calls;
}

void clear_profiler_calls() {
    std::lock_guard lock(g_mu);
    g_calls.clear();
}

}  // namespace gpt_emu
