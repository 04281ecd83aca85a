// Megatron's per-phase timers (megatron/core/timers.py): one accumulating timer per phase of
// the training step, each with Megatron's name and log level. A timer whose level is above
// --timing-log-level is not measured at all (Megatron hands out a dummy timer), so level 0
// costs one branch per phase. Every phase, measured or not, is also an NVTX range in the
// CUDA build (core/profiler.hpp), so a profile shows the same phases.
//
// Device time: like Megatron, which calls torch.cuda.synchronize() in start() and stop(),
// a measured timer runs `sync` (the backend's synchronize) before reading the clock at both
// ends, so work queued on the device is charged to the phase that queued it. This costs
// the overlap of host and device at the edges of measured phases - the price of honest
// numbers, paid only at levels that measure those phases.
//
// Megatron's barrier_with_L1_time (on unless --no-barrier-with-level-1-timing): a measured
// level-1 timer first waits in a world barrier (set_barrier), so its time starts when every
// rank is there and does not include waiting for a rank still busy with the phase before.
// Every rank must start the level-1 phases alike (each caller starts them on all ranks).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string_view>

#include "core/profiler.hpp"

namespace gpt {

// Megatron's names, in the order its training_log prints them.
enum class Phase : int {
    ForwardBackward,
    ForwardCompute,
    BackwardCompute,
    BatchGenerator,
    ForwardRecv,
    ForwardSend,
    BackwardRecv,
    BackwardSend,
    LayernormGradsAllReduce,
    EmbeddingGradsAllReduce,
    AllGradsSync,
    ParamsAllGather,
    OptimizerClipMainGrad,
    OptimizerInnerStep,
    Optimizer,
    kCount
};
inline constexpr int kNumPhases = static_cast<int>(Phase::kCount);

std::string_view phase_name(Phase p);
int phase_level(Phase p);  // Megatron's log_level of the timer: 1 or 2

class Timers {
public:
    // log_level: measure the phases up to this level (0: none). sync: finishes the work
    // queued on the device (empty for host-memory backends).
    explicit Timers(int log_level = 0, std::function<void()> sync = {});

    int log_level() const { return log_level_; }
    // Measures phase p whatever its level (the straggler report needs the compute phases).
    void always_measure(Phase p) { forced_[static_cast<std::size_t>(p)] = true; }
    bool measured(Phase p) const {
        return phase_level(p) <= log_level_ || forced_[static_cast<std::size_t>(p)];
    }

    void start(Phase p);
    void stop(Phase p);
    // A world barrier taken before a measured level-1 phase starts (empty: none).
    void set_barrier(std::function<void()> barrier) { barrier_ = std::move(barrier); }
    // Barriers taken so far (the level-1 starts with a barrier set).
    std::int64_t barriers_taken() const { return barriers_taken_; }

    // Seconds accumulated since the last reset (0 for a phase never measured).
    double elapsed(Phase p) const { return elapsed_[static_cast<std::size_t>(p)]; }
    std::array<double, kNumPhases> elapsed_all() const { return elapsed_; }
    void reset() { elapsed_.fill(0.0); }
    // Test hook: adds seconds to a phase as if it had run that long.
    void add(Phase p, double seconds) { elapsed_[static_cast<std::size_t>(p)] += seconds; }

    // start(p) now, stop(p) at the end of the scope; on a null Timers nothing at all.
    class Scope {
    public:
        Scope(Timers* t, Phase p) : t_(t), p_(p) {
            if (t_) t_->start(p_);
        }
        ~Scope() {
            if (t_) t_->stop(p_);
        }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

    private:
        Timers* t_;
        Phase p_;
    };

private:
    using clock = std::chrono::steady_clock;
    int log_level_;
    std::function<void()> sync_;
    std::function<void()> barrier_;
    std::int64_t barriers_taken_ = 0;
    std::array<bool, kNumPhases> forced_{};
    std::array<double, kNumPhases> elapsed_{};
    std::array<clock::time_point, kNumPhases> started_{};
};

}  // namespace gpt
