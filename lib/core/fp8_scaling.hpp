// FP8 scaling (issue 34): the per-tensor factors that map a tensor into an FP8 format's range
// before a GEMM, as Megatron gets them from Transformer Engine for --fp8-recipe tensorwise
// (current scaling) and --fp8-recipe delayed (an amax history). Pure host arithmetic over
// plain arrays, the same for the CPU backend, the emulator and the CUDA backend (which copies
// the scales to the device), so each rule is tested here once:
//  - a tensor x is quantised as fp8(x * scale) and its GEMM result multiplied by 1 / scale;
//  - current scaling: scale = fp8_max / amax(x) of the tensor itself; 1 when amax is 0, not
//    finite or NaN; the largest value of the tensor's type when the quotient overflows;
//  - delayed scaling: each tensor keeps the amaxes of its last `history` steps (row 0 collects
//    the current step's, reduced with MAX over micro-batches and over the ranks that must agree);
//    at the step's end the amax used is row 0 (most_recent) or the history's maximum (max),
//    scale = fp8_max * 2^-margin / amax when that amax is finite and positive, else the
//    previous scale (initially 1); then the history rolls: row 0 becomes the oldest row and is
//    cleared for the next step, the others move up by one.
#pragma once

#include <cstdint>
#include <vector>

#include "core/fp8.hpp"

namespace gpt {

enum class AmaxAlgo { MostRecent, Max };  // --fp8-amax-compute-algo most_recent | max

// Current (tensorwise) scaling of a tensor whose largest magnitude is amax. if_overflow: the
// scale when fp8_max / amax is not a finite float, the largest finite value of the tensor's
// own type (as Transformer Engine takes it: FLT_MAX for fp32, 0x1.fep127 for bf16).
float current_scale(float amax, Fp8Format format, float if_overflow);

// The largest magnitude of n values (NaN when one is NaN, so the scale rules above see it).
float amax_of(const float* x, std::int64_t n);

// Delayed scaling of `tensors` tensors: their amax histories and scales, stored as a
// checkpoint saves them (history: `length` rows of `tensors` amaxes, row 0 the current step's).
class DelayedScaling {
public:
    // formats[t]: the format tensor t is quantised to (E4M3 forward, E5M2 gradients under
    // --fp8-format hybrid); length >= 1; margin: --fp8-margin.
    DelayedScaling(std::vector<Fp8Format> formats, int length, AmaxAlgo algo, int margin);

    int tensors() const { return static_cast<int>(formats_.size()); }
    int length() const { return length_; }
    // Row 0: this step's amaxes, contiguous, for one MAX all-reduce over the group.
    float* current() { return history_.data(); }
    void record(int tensor, float amax);  // row 0 of tensor = max(it, amax)
    // Ends the step: new scales from the history, then the roll.
    void update();

    float scale(int tensor) const { return scales_[static_cast<std::size_t>(tensor)]; }
    float scale_inv(int tensor) const { return 1.0f / scale(tensor); }
    // The state a checkpoint carries, and its restore (sizes checked: InternalError).
    const std::vector<float>& history() const { return history_; }
    const std::vector<float>& scales() const { return scales_; }
    void restore(const std::vector<float>& history, const std::vector<float>& scales);

private:
    std::vector<Fp8Format> formats_;
    int length_;
    AmaxAlgo algo_;
    int margin_;
    std::vector<float> history_;  // length_ x tensors, row-major
    std::vector<float> scales_;
};

}  // namespace gpt
