// When training stops early, with Megatron's semantics: --exit-interval N (after the
// iteration divisible by N), --exit-duration-in-mins (the slowest rank's clock decides),
// and --exit-signal-handler (SIGTERM or SIGUSR1 sets a flag; the ranks agree on it at the
// end of each iteration, then save and exit 0).
#pragma once

#include <csignal>
#include <cstdint>
#include <memory>
#include <string>

#include "config/config.hpp"
#include "core/timer.hpp"
#include "dist/communicator.hpp"
#include "train/run/signal_notice.hpp"

namespace gpt::train {

// Installs handlers for SIGTERM and SIGUSR1 that only record the signal (async-signal-safe)
// and restores the previous handlers when destroyed. Nested catchers share the one flag; the
// outermost installs and restores. The flag is process-wide because a signal handler can
// reach nothing else.
class SignalCatcher {
public:
    SignalCatcher();
    ~SignalCatcher();
    SignalCatcher(const SignalCatcher&) = delete;
    SignalCatcher& operator=(const SignalCatcher&) = delete;

    // The last signal caught (0: none) since the outermost catcher was installed.
    static int received();
    static void clear();  // for tests that reuse the process

private:
    bool installed_ = false;
    struct sigaction old_term_ {}, old_usr1_ {};
};

enum class ExitReason { None, Interval, Duration, Signal };

class ExitConditions {
public:
    // world: every rank of the job (the decision must be the same everywhere).
    ExitConditions(const TrainingConfig& t, dist::Communicator& world);
    ~ExitConditions();

    // Collective over world when --exit-duration-in-mins or --exit-signal-handler is set
    // (every rank must call it after every iteration). Signal first, then duration, then
    // interval, as Megatron checks them.
    ExitReason check(std::int64_t iteration);
    // The log line for a decision, e.g. "exiting on signal SIGUSR1 after saving checkpoint
    // at iteration 12"; `saved` says whether a checkpoint was written.
    std::string describe(ExitReason why, std::int64_t iteration, bool saved) const;
    int agreed_signal() const { return signal_; }

private:
    TrainingConfig t_;
    dist::Communicator& world_;
    Stopwatch clock_;
    std::unique_ptr<SignalCatcher> catcher_;
    std::unique_ptr<SignalNotice> notice_;  // without --exit-signal-handler: log SIGUSR1
    int signal_ = 0;
    double minutes_ = 0.0;
};

}  // namespace gpt::train
