#include "pipeline/schedule.hpp"

#include <algorithm>

#include "core/errors.hpp"

namespace gpt::pipeline {

std::string to_string(const Action& a) {
    return (a.pass == Pass::Forward ? "F" : "B") + std::to_string(a.microbatch) + "." +
           std::to_string(a.chunk);
}

std::vector<Action> sequential_schedule(int m) {
    GPT_REQUIRE(m > 0, UsageError, "need at least one micro-batch, got ", m);
    std::vector<Action> s;
    for (int i = 0; i < m; ++i) {
        s.push_back({Pass::Forward, i, 0});
        s.push_back({Pass::Backward, i, 0});
    }
    return s;
}

std::vector<Action> one_f_one_b_schedule(int p, int stage, int m) {
    GPT_REQUIRE(p > 0 && stage >= 0 && stage < p && m > 0, UsageError,
                "bad 1F1B schedule arguments: pp ", p, ", stage ", stage, ", micro-batches ", m);
    const int warmup = std::min(p - stage - 1, m);
    std::vector<Action> s;
    for (int i = 0; i < warmup; ++i) s.push_back({Pass::Forward, i, 0});
    for (int i = 0; i < m - warmup; ++i) {
        s.push_back({Pass::Forward, warmup + i, 0});
        s.push_back({Pass::Backward, i, 0});
    }
    for (int i = m - warmup; i < m; ++i) s.push_back({Pass::Backward, i, 0});
    return s;
}

namespace {

// The k-th forward (or backward) of an interleaved stage, in Megatron's order: groups of
// p micro-batches pass through chunk 0, then chunk 1, ...; backwards visit chunks in reverse.
Action interleaved_action(Pass pass, int k, int p, int v) {
    const int in_group = k % (p * v);
    int chunk = in_group / p;
    if (pass == Pass::Backward) chunk = v - 1 - chunk;
    const int microbatch = (k / (p * v)) * p + k % p;
    return {pass, microbatch, chunk};
}

}  // namespace

std::vector<Action> interleaved_schedule(int p, int stage, int m, int v) {
    GPT_REQUIRE(p > 0 && stage >= 0 && stage < p && m > 0 && v > 0, UsageError,
                "bad interleaved schedule arguments: pp ", p, ", stage ", stage,
                ", micro-batches ", m, ", chunks ", v);
    GPT_REQUIRE(m % p == 0, UsageError, "the interleaved schedule needs the number of micro-batches (",
                m, ") to be a multiple of pipeline-model-parallel-size (", p, ")");
    const int total = m * v;
    int warmup;
    if (m == p) {
        warmup = total;  // every forward fits before the first backward is possible anyway
    } else {
        warmup = std::min((p - stage - 1) * 2 + (v - 1) * p, total);
    }
    std::vector<Action> s;
    for (int k = 0; k < warmup; ++k) s.push_back(interleaved_action(Pass::Forward, k, p, v));
    for (int i = 0; i < total - warmup; ++i) {
        s.push_back(interleaved_action(Pass::Forward, warmup + i, p, v));
        s.push_back(interleaved_action(Pass::Backward, i, p, v));
    }
    for (int i = total - warmup; i < total; ++i)
        s.push_back(interleaved_action(Pass::Backward, i, p, v));
    return s;
}

std::vector<Action> forward_only_schedule(int num_microbatches, int num_chunks) {
    GPT_REQUIRE(num_microbatches >= 1 && num_chunks >= 1, UsageError,
                "a forward-only schedule needs >= 1 micro-batch and chunk");
    std::vector<Action> out;
    for (int mb = 0; mb < num_microbatches; ++mb)
        for (int c = 0; c < num_chunks; ++c) out.push_back({Pass::Forward, mb, c});
    return out;
}

std::vector<Action> make_schedule(int p, int stage, int m, int v) {
    if (p == 1 && v == 1) return sequential_schedule(m);
    if (v == 1) return one_f_one_b_schedule(p, stage, m);
    return interleaved_schedule(p, stage, m, v);
}

int max_in_flight(const std::vector<Action>& schedule) {
    int live = 0, peak = 0;
    for (const Action& a : schedule) {
        live += a.pass == Pass::Forward ? 1 : -1;
        peak = std::max(peak, live);
    }
    return peak;
}

}  // namespace gpt::pipeline
