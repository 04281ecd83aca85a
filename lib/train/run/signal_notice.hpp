// SIGUSR1 without --exit-signal-handler: Slurm's --signal warning that the time limit is
// near. Its default action would kill the job, but libraries in the process may install
// their own handler that swallows it, so the job goes on and the warning is lost. Without
// the flag we record the signal (chaining to a handler that was there before) and the
// trainer logs that it arrived and that checkpoint-on-signal is off.
#pragma once

#include <csignal>
#include <string>

namespace gpt::train {

class SignalNotice {
public:
    SignalNotice();   // installs the SIGUSR1 recorder
    ~SignalNotice();  // restores the previous handler
    SignalNotice(const SignalNotice&) = delete;
    SignalNotice& operator=(const SignalNotice&) = delete;

    // The line to log once per arrival since the last call ("" when none arrived).
    static std::string take();

private:
    struct sigaction old_ {};
    bool installed_ = false;
};

}  // namespace gpt::train
