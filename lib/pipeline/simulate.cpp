#include "pipeline/simulate.hpp"

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "pipeline/schedule.hpp"

namespace gpt::pipeline {

namespace {

using Key = std::tuple<int, int, int, int>;  // pass, stage, microbatch, chunk

// The action on another stage whose output this action consumes (none: -1 stage).
// Forward of chunk c on stage s takes stage s-1's output of chunk c, or for s == 0 the
// last stage's output of chunk c-1; backward mirrors it.
bool producer(int p, int v, int stage, const Action& a, Key& out) {
    if (a.pass == Pass::Forward) {
        if (stage > 0) return out = {0, stage - 1, a.microbatch, a.chunk}, true;
        if (a.chunk > 0) return out = {0, p - 1, a.microbatch, a.chunk - 1}, true;
        return false;
    }
    if (stage < p - 1) return out = {1, stage + 1, a.microbatch, a.chunk}, true;
    if (a.chunk < v - 1) return out = {1, 0, a.microbatch, a.chunk + 1}, true;
    // The loss's backward starts from this stage's own forward (already ordered locally).
    return false;
}

}  // namespace

SimulationResult simulate_pipeline(int p, int m, int v, double tf, double tb) {
    std::vector<std::vector<Action>> sched(p);
    for (int s = 0; s < p; ++s) sched[s] = make_schedule(p, s, m, v);
    std::vector<std::size_t> next(p, 0);
    std::vector<double> free_at(p, 0.0);
    std::map<Key, double> done;
    const double cf = tf / v, cb = tb / v;

    std::size_t remaining = 0;
    for (const auto& s : sched) remaining += s.size();
    while (remaining > 0) {
        bool progressed = false;
        for (int s = 0; s < p; ++s) {
            while (next[s] < sched[s].size()) {
                const Action& a = sched[s][next[s]];
                Key dep;
                double ready = free_at[s];
                if (producer(p, v, s, a, dep)) {
                    auto it = done.find(dep);
                    if (it == done.end()) break;  // input not produced yet
                    ready = std::max(ready, it->second);
                }
                const double end = ready + (a.pass == Pass::Forward ? cf : cb);
                done[{a.pass == Pass::Forward ? 0 : 1, s, a.microbatch, a.chunk}] = end;
                free_at[s] = end;
                ++next[s];
                --remaining;
                progressed = true;
            }
        }
        if (!progressed) {
            SimulationResult r;
            r.deadlock = true;
            for (int s = 0; s < p; ++s)
                if (next[s] < sched[s].size())
                    r.detail += "stage " + std::to_string(s) + " waits at " + to_string(sched[s][next[s]]) + "; ";
            return r;
        }
    }
    SimulationResult r;
    r.makespan = *std::max_element(free_at.begin(), free_at.end());
    r.ideal = m * (tf + tb);
    r.bubble_fraction = (r.makespan - r.ideal) / r.ideal;
    return r;
}

}  // namespace gpt::pipeline
