// Megatron's timer report (timers.log in megatron/core/timers.py) and the straggler report
// of --log-straggler: each rank's phase times gathered over the world, printed by rank 0
// after the iteration line.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "config/enums.hpp"
#include "core/timers.hpp"
#include "dist/communicator.hpp"

namespace gpt::train {

// Seconds per rank and phase, accumulated over a logging interval.
struct TimerTable {
    int ranks = 0;
    std::vector<double> seconds;  // ranks x kNumPhases, row-major
    double at(int rank, Phase p) const {
        return seconds[static_cast<std::size_t>(rank) * kNumPhases + static_cast<std::size_t>(p)];
    }
};

// Every rank's elapsed times (collective over `world`: one all-gather).
TimerTable gather_timers(const Timers& timers, dist::Communicator& world);

// Megatron's block for the phases up to `log_level`, times in ms divided by `normalizer`
// (the iterations of the interval); a rank that did not run a phase (0) is left out of
// its min and max, and a phase no rank ran is not printed. option: "minmax"
//   (min, max) time across ranks (ms):
//       forward-backward ...............................: (12.34, 12.56)
// "max" ("max time across ranks (ms):", one figure) or "all" ("times across ranks (ms):",
// a "  <name>:" line then "     rank  r: t" per rank). "" when nothing is printed.
std::string format_timers(const TimerTable& table, int log_level, TimingLogOption option,
                          double normalizer);

// Megatron's timers.write (--log-timers-to-tensorboard): for each phase up to `log_level`
// that some rank ran, its maximum over ranks in seconds divided by `normalizer`.
std::vector<std::pair<Phase, double>> timer_maxima(const TimerTable& table, int log_level, double normalizer);

struct Straggler {
    int rank = 0;
    double ms = 0.0;            // compute time per iteration
    double over_median = 0.0;   // fraction above the median: 0.25 = 25% slower
};

// The up to `max_count` slowest ranks strictly slower than the median of `ms_per_rank`,
// slowest first. Nothing when the median is 0 (no compute measured).
std::vector<Straggler> select_stragglers(const std::vector<double>& ms_per_rank, std::size_t max_count);
double median(std::vector<double> v);
// The up to `max_count` fastest ranks strictly faster than the median, fastest first
// (over_median negative: -0.2 = 20% faster). Megatron's --straggler-minmax-count reports
// both ends.
std::vector<Straggler> select_fastest(const std::vector<double>& ms_per_rank, std::size_t max_count);

// " straggler: rank 3 (node07): compute 123.45 ms per iteration, 37.2% slower than the median 90.01 ms"
std::string format_straggler(const Straggler& s, const std::string& host, double median_ms);
// " fastest: rank 0 (node01): compute 80.00 ms per iteration, 20.0% faster than the median 100.00 ms"
std::string format_fastest(const Straggler& s, const std::string& host, double median_ms);

// --log-straggler's lines: the up to `count` (--straggler-minmax-count) slowest ranks above
// the median, then the up to `count` fastest below it.
std::vector<std::string> straggler_report(const std::vector<double>& ms_per_rank,
                                          const std::vector<std::string>& hosts, std::size_t count);

// Every rank's host name, indexed by world rank (collective over `world`).
std::vector<std::string> gather_hostnames(dist::Communicator& world);

}  // namespace gpt::train
