#include "core/timers.hpp"

#include <utility>

namespace gpt {

namespace {
struct PhaseInfo {
    const char* name;
    int level;
};
// Megatron's timer names and log levels (training.py, schedules.py, p2p_communication.py,
// distributed/finalize_model_grads.py, optimizer/optimizer.py).
constexpr std::array<PhaseInfo, kNumPhases> kPhases{{
    {"forward-backward", 1},
    {"forward-compute", 2},
    {"backward-compute", 2},
    {"batch-generator", 2},
    {"forward-recv", 2},
    {"forward-send", 2},
    {"backward-recv", 2},
    {"backward-send", 2},
    {"layernorm-grads-all-reduce", 1},
    {"embedding-grads-all-reduce", 1},
    {"all-grads-sync", 1},
    {"params-all-gather", 1},
    {"optimizer-clip-main-grad", 1},
    {"optimizer-inner-step", 1},
    {"optimizer", 1},
}};
}  // namespace

std::string_view phase_name(Phase p) { return kPhases[static_cast<std::size_t>(p)].name; }
int phase_level(Phase p) { return kPhases[static_cast<std::size_t>(p)].level; }

Timers::Timers(int log_level, std::function<void()> sync) : log_level_(log_level), sync_(std::move(sync)) {}

void Timers::start(Phase p) {
    profiler::range_push(kPhases[static_cast<std::size_t>(p)].name);
    if (!measured(p)) return;
    // Megatron's start(barrier=barrier_with_L1_time): level-1 timers only, and only those
    // measured at this --timing-log-level (a forced level-2 phase takes none).
    if (barrier_ && phase_level(p) == 1 && phase_level(p) <= log_level_) {
        barrier_();
        ++barriers_taken_;
    }
    if (sync_) sync_();
    started_[static_cast<std::size_t>(p)] = clock::now();
}

void Timers::stop(Phase p) {
    if (measured(p)) {
        if (sync_) sync_();
        const auto i = static_cast<std::size_t>(p);
        elapsed_[i] += std::chrono::duration<double>(clock::now() - started_[i]).count();
    }
    profiler::range_pop();
}

}  // namespace gpt
