// Predicted time per iteration: GEMM and attention FLOPs at the device's efficiency,
// memory-bound element-wise work at HBM bandwidth, TP collectives over NVLink or the
// inter-node fabric, pipeline bubble (p - 1)/(v m), p2p transfers, the data-parallel
// gradient reduction less its overlap with the last backward, and the optimizer step.
#pragma once

#include "plan/device_presets.hpp"
#include "plan/layout.hpp"
#include "plan/model_shape.hpp"

namespace gpt::plan {

// Forward FLOPs of one transformer layer for one micro-batch, whole model (not per rank):
// GEMMs 2bsh(q + h + f1 + f) (QKV q = 3h, or (a + 2g) h / a with grouped-query attention; dense;
// fc1 f1 = f, or 2f with SwiGLU; fc2) and attention 4bs^2h (QK^T and AV),
// which for f = 4h is Narayanan et al. 2021's 24bsh^2(1 + s/(6h)).
double layer_gemm_flops(const ModelShape& m, int micro_batch);
double layer_attention_flops(const ModelShape& m, int micro_batch);
// Forward FLOPs of the LM head (logits), 2bshV_pad.
double logits_flops(const ModelShape& m, int micro_batch, int tp);
// FLOPs of one iteration of global batch B without recomputation: 3x the forward (backward
// is twice the forward), Narayanan's 72Bslh^2(1 + s/(6h) + V/(12hl)) for f = 4h. The
// "hardware" count adds the recomputed forward work (96 instead of 72 under full recompute).
double model_flops_per_iteration(const ModelShape& m, int global_batch, int tp);
double hardware_flops_per_iteration(const ModelShape& m, const Layout& l);

// Link the planner assumes for the collectives; --plan-intra-node-gbps / --plan-inter-node-gbps
// override the preset's bus bandwidths (0 keeps the preset).
struct Fabric {
    double intra_node_gbps = 0;
    double inter_node_gbps = 0;
    bool overlap_grad_reduce = true;  // DP reduction overlaps the last micro-batch's backward
    // Weight-gradient GEMMs accumulate straight into the fp32 gradients (beta = 1): this
    // project's backends, and Megatron since --gradient-accumulation-fusion. false models
    // code that adds each micro-batch's 16-bit weight gradient into an fp32 main_grad in a
    // separate memory-bound pass (Megatron 2021's local DDP hook, the SC'21 runs).
    bool fused_grad_accumulation = true;
};
Fabric default_fabric(const DevicePreset& dev);

// The four linear layers' GEMMs of one transformer layer for one micro-batch on one rank
// (QKV, attention projection, fc1, fc2, each split t ways), in seconds at the preset's GEMM
// efficiency: forward, data gradient and weight gradient, each 2 b s h (q + h + f1 + f) / t
// FLOPs; fc1's forward and fc2's data gradient at the kernels' GELU-epilogue rate where the
// GELU is fused into them. fp8: at the device's FP8 peak (the same efficiency curve), the weight gradient too
// unless the shape's --no-fp8-wgrad keeps it 16-bit; else at the 16-bit (or fp32) peak.
struct LinearGemmSeconds {
    double forward = 0, data_grad = 0, weight_grad = 0;
    double total() const { return forward + data_grad + weight_grad; }
};
LinearGemmSeconds linear_gemm_seconds(const ModelShape& m, const Layout& l, const DevicePreset& dev, bool fp8);

// UsageError when the shape asks for FP8 and the device has none (A100): one line naming
// --fp8-format and the device.
void require_fp8_device(const ModelShape& m, const DevicePreset& dev);

struct TimeBreakdown {
    double compute = 0;        // s: m micro-batches of forward + backward (+ recompute) on the slowest stage
    double tp_comm = 0;        // s: TP all-reduce / all-gather / reduce-scatter in that critical path
    double pp_p2p = 0;         // s: activation send/recv between stages
    double pp_bubble = 0;      // s: (p - 1)/v idle micro-batch slots
    double dp_exposed = 0;     // s: gradient reduction (and param all-gather) not hidden by backward
    double optimizer = 0;      // s: Adam step over the local shard
    double total() const { return compute + tp_comm + pp_p2p + pp_bubble + dp_exposed + optimizer; }
    // Of compute (not added to the total): every GEMM's time (the linear layers, attention's
    // batched GEMMs, the LM head) and the part of it run in FP8.
    double gemm = 0;
    double gemm_fp8 = 0;
};

TimeBreakdown iteration_time(const ModelShape& m, const Layout& l, const DevicePreset& dev,
                             const Fabric& fabric, const Placement& place);

// Ring collective times (s) for `bytes` of data over n ranks at bus bandwidth gbps (GB/s):
// all-reduce moves 2(n-1)/n of the data, all-gather and reduce-scatter (n-1)/n each; plus a
// start-up latency of latency_us per log2(n) step.
double allreduce_seconds(double bytes, int n, double gbps, double latency_us);
double allgather_seconds(double bytes, int n, double gbps, double latency_us);

}  // namespace gpt::plan
