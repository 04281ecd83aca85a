#include "train/monitor/timer_log.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <sstream>

namespace gpt::train {

TimerTable gather_timers(const Timers& timers, dist::Communicator& world) {
    const std::array<double, kNumPhases> mine = timers.elapsed_all();
    TimerTable t;
    t.ranks = world.size();
    t.seconds.resize(static_cast<std::size_t>(t.ranks) * kNumPhases);
    world.all_gather(mine.data(), t.seconds.data(), kNumPhases, dist::CommType::F64);
    return t;
}

namespace {
std::string fixed2(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return buf;
}
// Megatron's "(name + ' ').ljust(48, '.')".
std::string dotted(std::string_view name) {
    std::string s(name);
    s += ' ';
    if (s.size() < 48) s.append(48 - s.size(), '.');
    return s;
}
}  // namespace

std::string format_timers(const TimerTable& table, int log_level, TimingLogOption option,
                          double normalizer) {
    const double to_ms = 1000.0 / normalizer;
    std::ostringstream os;
    bool any = false;
    if (option == TimingLogOption::All) os << "times across ranks (ms):";
    else os << (option == TimingLogOption::Max ? "max time across ranks (ms):" : "(min, max) time across ranks (ms):");
    for (int i = 0; i < kNumPhases; ++i) {
        const auto p = static_cast<Phase>(i);
        if (phase_level(p) > log_level) continue;
        if (option == TimingLogOption::All) {
            bool named = false;
            for (int r = 0; r < table.ranks; ++r) {
                const double s = table.at(r, p);
                if (s <= 0.0) continue;
                if (!named) os << "\n  " << phase_name(p) << ':';
                named = any = true;
                char buf[64];
                std::snprintf(buf, sizeof buf, "\n     rank %2d: %.2f", r, s * to_ms);
                os << buf;
            }
            continue;
        }
        double lo = 0.0, hi = 0.0;
        bool found = false;
        for (int r = 0; r < table.ranks; ++r) {
            const double s = table.at(r, p);
            if (s <= 0.0) continue;  // this rank has no such phase
            lo = found ? std::min(lo, s) : s;
            hi = found ? std::max(hi, s) : s;
            found = true;
        }
        if (!found) continue;
        any = true;
        os << "\n    " << dotted(phase_name(p)) << ": ";
        if (option == TimingLogOption::Max) os << fixed2(hi * to_ms);
        else os << '(' << fixed2(lo * to_ms) << ", " << fixed2(hi * to_ms) << ')';
    }
    return any ? os.str() : "";
}

std::vector<std::pair<Phase, double>> timer_maxima(const TimerTable& table, int log_level, double normalizer) {
    std::vector<std::pair<Phase, double>> out;
    for (int i = 0; i < kNumPhases; ++i) {
        const auto p = static_cast<Phase>(i);
        if (phase_level(p) > log_level) continue;
        double hi = 0.0;
        for (int r = 0; r < table.ranks; ++r) hi = std::max(hi, table.at(r, p));
        if (hi > 0.0) out.emplace_back(p, hi / normalizer);
    }
    return out;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<Straggler> select_stragglers(const std::vector<double>& ms_per_rank, std::size_t max_count) {
    std::vector<Straggler> out;
    const double med = median(ms_per_rank);
    if (med <= 0.0) return out;
    for (std::size_t r = 0; r < ms_per_rank.size(); ++r)
        if (ms_per_rank[r] > med)
            out.push_back({static_cast<int>(r), ms_per_rank[r], ms_per_rank[r] / med - 1.0});
    // Slowest first; equal times by rank, so the report is stable.
    std::sort(out.begin(), out.end(), [](const Straggler& a, const Straggler& b) {
        return a.ms != b.ms ? a.ms > b.ms : a.rank < b.rank;
    });
    if (out.size() > max_count) out.resize(max_count);
    return out;
}

std::vector<Straggler> select_fastest(const std::vector<double>& ms_per_rank, std::size_t max_count) {
    std::vector<Straggler> out;
    const double med = median(ms_per_rank);
    if (med <= 0.0) return out;
    for (std::size_t r = 0; r < ms_per_rank.size(); ++r)
        if (ms_per_rank[r] < med)
            out.push_back({static_cast<int>(r), ms_per_rank[r], ms_per_rank[r] / med - 1.0});
    // Fastest first; equal times by rank, so the report is stable.
    std::sort(out.begin(), out.end(), [](const Straggler& a, const Straggler& b) {
        return a.ms != b.ms ? a.ms < b.ms : a.rank < b.rank;
    });
    if (out.size() > max_count) out.resize(max_count);
    return out;
}

std::string format_fastest(const Straggler& s, const std::string& host, double median_ms) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  " fastest: rank %d (%s): compute %.2f ms per iteration, %.1f%% faster than the median %.2f ms",
                  s.rank, host.c_str(), s.ms, -100.0 * s.over_median, median_ms);
    return buf;
}

std::vector<std::string> straggler_report(const std::vector<double>& ms_per_rank,
                                          const std::vector<std::string>& hosts, std::size_t count) {
    const double med = median(ms_per_rank);
    std::vector<std::string> out;
    for (const Straggler& s : select_stragglers(ms_per_rank, count))
        out.push_back(format_straggler(s, hosts.at(static_cast<std::size_t>(s.rank)), med));
    for (const Straggler& s : select_fastest(ms_per_rank, count))
        out.push_back(format_fastest(s, hosts.at(static_cast<std::size_t>(s.rank)), med));
    return out;
}

std::string format_straggler(const Straggler& s, const std::string& host, double median_ms) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  " straggler: rank %d (%s): compute %.2f ms per iteration, %.1f%% slower than the median %.2f ms",
                  s.rank, host.c_str(), s.ms, 100.0 * s.over_median, median_ms);
    return buf;
}

std::vector<std::string> gather_hostnames(dist::Communicator& world) {
    constexpr int kLen = 256;  // HOST_NAME_MAX is 64 on Linux; room for longer FQDNs
    std::array<char, kLen> mine{};
    if (gethostname(mine.data(), kLen - 1) != 0) std::snprintf(mine.data(), kLen, "unknown host");
    mine[kLen - 1] = '\0';
    std::vector<char> all(static_cast<std::size_t>(world.size()) * kLen);
    world.all_gather(mine.data(), all.data(), kLen, dist::CommType::U8);
    std::vector<std::string> hosts;
    for (int r = 0; r < world.size(); ++r) hosts.emplace_back(all.data() + static_cast<std::size_t>(r) * kLen);
    return hosts;
}

}  // namespace gpt::train
