#include "train/run/signal_notice.hpp"

namespace gpt::train {

namespace {
volatile std::sig_atomic_t g_arrived = 0;
struct sigaction g_previous {};

extern "C" void note_usr1(int signum, siginfo_t* info, void* ctx) {
    g_arrived = 1;
    // A library's handler that was installed before keeps working.
    if (g_previous.sa_flags & SA_SIGINFO) {
        if (g_previous.sa_sigaction) g_previous.sa_sigaction(signum, info, ctx);
    } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN &&
               g_previous.sa_handler != nullptr) {
        g_previous.sa_handler(signum);
    }
}
}  // namespace

SignalNotice::SignalNotice() {
    struct sigaction sa {};
    sa.sa_sigaction = note_usr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
    if (sigaction(SIGUSR1, &sa, &old_) == 0) {
        g_previous = old_;
        installed_ = true;
    }
}

SignalNotice::~SignalNotice() {
    if (installed_) sigaction(SIGUSR1, &old_, nullptr);
}

std::string SignalNotice::take() {
    if (!g_arrived) return "";
    g_arrived = 0;
    return "received SIGUSR1 (e.g. Slurm's --signal warning before the time limit); "
           "checkpoint-on-signal is off (--exit-signal-handler not given): training goes on";
}

}  // namespace gpt::train
