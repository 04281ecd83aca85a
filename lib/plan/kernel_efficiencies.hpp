// What the kernels of a training step achieve on a device, as fractions of the device's
// datasheet peaks (DevicePreset holds those). Kept apart from the datasheet so that a faster
// kernel changes only these numbers and their source, not the device; docs/planner.md says
// which measurement or publication each preset's numbers come from.
#pragma once

#include <vector>

namespace gpt::plan {

// Flash attention at one head dimension, as fractions of the 16-bit peak in the planner's
// FLOP count (Megatron's: the forward's two s x s products are 4 b s^2 h, no causal
// discount; the backward is twice that).
struct FlashAttentionRate {
    int head_dim = 0;
    double forward = 0;
    double backward = 0;
};

// bench/attention_gpu's figures as a FlashAttentionRate on a device of this 16-bit peak. The
// bench counts FlashAttention's way: the causal half only, forward 2 b np s^2 hn and
// forward + backward 3.5x that, so the forward runs 4 b s^2 h planner FLOPs in
// 2 b s^2 h / fwd_tflops and the backward 8 b s^2 h in the rest of the forward + backward time.
FlashAttentionRate flash_rate_from_bench(int head_dim, double fwd_tflops, double fwd_bwd_tflops,
                                         double peak_tflops);

// Large-GEMM efficiency for which the planner's small-GEMM curve, eff x W / (W + half_gflop),
// gives `tflops` on a GEMM of `gflop` GFLOP (a measured GEMM of a known size).
double gemm_efficiency_from_rate(double tflops, double gflop, double peak_tflops, double half_gflop);

struct KernelEfficiencies {
    double gemm = 0;             // achieved fraction of the peak on large GEMMs
    double gemm_half_gflop = 0;  // GEMM size (GFLOP) at which half of `gemm` is reached
    // 0: bias-GELU is an element-wise pass of its own (Megatron's fused bias_gelu kernel).
    // > 0: the GELU sits in the epilogue of fc1's forward GEMM and its gradient in fc2's
    // data-gradient GEMM (this project's backends): those two GEMMs run at this fraction of
    // a plain GEMM's rate and there is no separate pass (SwiGLU keeps its pass).
    double gelu_epilogue = 0;
    double attention_core = 0;   // batched QK^T / AV GEMMs of the unfused attention core
    // Flash attention, forward and backward alike, where flash_by_head_dim is empty.
    double flash_attention = 0;
    std::vector<FlashAttentionRate> flash_by_head_dim;  // measured, ascending head_dim
    double memory = 0;           // element-wise kernels: achieved fraction of HBM bandwidth

    // Flash attention at head dimension d: the table's entry, linear between two entries,
    // the nearest entry outside them; flash_attention for both passes without a table.
    FlashAttentionRate flash(int head_dim) const;
};

}  // namespace gpt::plan
