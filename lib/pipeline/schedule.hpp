// Pipeline schedules as pure functions: the order in which one pipeline stage runs the
// forward and backward passes of its micro-batches (Megatron's 1F1B and interleaved 1F1B).
// Communication is implied by the actions: see executor.hpp.
#pragma once

#include <string>
#include <vector>

namespace gpt::pipeline {

enum class Pass { Forward, Backward };

struct Action {
    Pass pass;
    int microbatch;  // 0 .. m-1
    int chunk;       // model chunk (virtual stage) on this rank, 0 .. v-1
    bool operator==(const Action&) const = default;
};

std::string to_string(const Action& a);  // "F3.0", "B1.1"

// No pipelining (pp == 1): all forwards and backwards of each micro-batch in turn
// (F0 B0 F1 B1 ...), so activations of one micro-batch are live at a time.
std::vector<Action> sequential_schedule(int num_microbatches);

// 1F1B (PipeDream-Flush): stage s runs min(p - s - 1, m) warm-up forwards, then alternates
// one forward and one backward, then drains the remaining backwards.
std::vector<Action> one_f_one_b_schedule(int pp_size, int stage, int num_microbatches);

// Interleaved 1F1B with v model chunks per stage (Narayanan et al. 2021, Megatron's
// forward_backward_pipelining_with_interleaving): micro-batches go through the chunks in
// groups of p; warm-up is 2(p - s - 1) + (v - 1)p forwards. Needs m % p == 0.
std::vector<Action> interleaved_schedule(int pp_size, int stage, int num_microbatches,
                                         int num_chunks);

// Evaluation: forwards only, micro-batch by micro-batch through this rank's chunks in
// order. Every input comes from a smaller (micro-batch, virtual stage), so no stage waits
// on one that waits on it.
std::vector<Action> forward_only_schedule(int num_microbatches, int num_chunks);

// The schedule for this configuration (sequential when pp == 1, interleaved when v > 1).
std::vector<Action> make_schedule(int pp_size, int stage, int num_microbatches, int num_chunks);

// Micro-batches whose activations are alive at once at the peak of this schedule (for the
// memory model): the largest number of forwards not yet matched by their backward.
int max_in_flight(const std::vector<Action>& schedule);

}  // namespace gpt::pipeline
