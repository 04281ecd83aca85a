#include "train/run/exit_conditions.hpp"

#include <sstream>

#include "core/errors.hpp"
#include "log/log.hpp"

namespace gpt::train {

namespace {

// Written only by the handler, read by the training thread between iterations. A
// sig_atomic_t store is the one thing a handler may safely do.
volatile std::sig_atomic_t g_signal = 0;
int g_depth = 0;  // nested SignalCatchers (main thread only)

extern "C" void record_signal(int signum) { g_signal = signum; }

const char* signal_name(int s) {
    if (s == SIGTERM) return "SIGTERM";
    if (s == SIGUSR1) return "SIGUSR1";
    return "a signal";
}

}  // namespace

SignalCatcher::SignalCatcher() {
    if (g_depth++ > 0) return;
    g_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = record_signal;
    sigemptyset(&sa.sa_mask);
    // SA_RESTART: a signal arriving inside MPI or file I/O must not turn into EINTR there.
    sa.sa_flags = SA_RESTART;
    GPT_REQUIRE(sigaction(SIGTERM, &sa, &old_term_) == 0 && sigaction(SIGUSR1, &sa, &old_usr1_) == 0,
                InternalError, "--exit-signal-handler: sigaction failed");
    installed_ = true;
}

SignalCatcher::~SignalCatcher() {
    --g_depth;
    if (!installed_) return;
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGUSR1, &old_usr1_, nullptr);
}

int SignalCatcher::received() { return g_signal; }
void SignalCatcher::clear() { g_signal = 0; }

ExitConditions::ExitConditions(const TrainingConfig& t, dist::Communicator& world)
    : t_(t), world_(world) {
    if (t.exit_signal_handler) catcher_ = std::make_unique<SignalCatcher>();
    else notice_ = std::make_unique<SignalNotice>();
}

ExitConditions::~ExitConditions() = default;

ExitReason ExitConditions::check(std::int64_t iteration) {
    if (notice_)
        if (const std::string line = SignalNotice::take(); !line.empty()) GPT_LOG(warning) << line;
    if (catcher_) {
        // Each rank saw the signal at its own time; the max makes them all act on the same
        // iteration (a signal one rank got counts for all: Slurm may signal only some).
        std::int32_t s = SignalCatcher::received();
        world_.all_reduce(&s, 1, dist::CommType::I32, dist::ReduceOp::Max);
        if (s != 0) {
            signal_ = s;
            return ExitReason::Signal;
        }
    }
    if (t_.exit_duration_in_mins > 0.0) {
        // Every rank must take the same decision, so the slowest clock decides.
        double minutes = clock_.seconds() / 60.0;
        world_.all_reduce(&minutes, 1, dist::CommType::F64, dist::ReduceOp::Max);
        minutes_ = minutes;
        if (minutes > t_.exit_duration_in_mins) return ExitReason::Duration;
    }
    if (t_.exit_interval > 0 && iteration % t_.exit_interval == 0) return ExitReason::Interval;
    return ExitReason::None;
}

std::string ExitConditions::describe(ExitReason why, std::int64_t iteration, bool saved) const {
    std::ostringstream os;
    switch (why) {
        case ExitReason::Signal: os << "exiting on signal " << signal_name(signal_); break;
        case ExitReason::Duration:
            os << "exiting program after " << minutes_ << " minutes (--exit-duration-in-mins)";
            break;
        case ExitReason::Interval: os << "exiting program (--exit-interval)"; break;
        case ExitReason::None: return "";
    }
    os << (saved ? " after saving checkpoint" : "") << " at iteration " << iteration;
    return os.str();
}

}  // namespace gpt::train
