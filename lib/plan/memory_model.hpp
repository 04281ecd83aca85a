// Predicted memory per device: weights, gradients and optimizer state (Megatron's bytes per
// parameter), the activations this project's model saves for backward (Korthikanti et al.
// 2022's accounting, adjusted to what lib/model stores) for the micro-batch slots each model
// chunk allocates under its pipeline schedule, and buffers (the model's shared workspace,
// the distributed optimizer's scratch, communication, runtime, fragmentation margin).
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.hpp"
#include "plan/device_presets.hpp"
#include "plan/layout.hpp"
#include "plan/model_shape.hpp"

namespace gpt::plan {

// Bytes each parameter costs, by where they live. Mixed precision (fp16/bf16): 2-byte
// parameter, fp32 gradient accumulation buffer (4), fp32 main parameter (4) and Adam's two
// fp32 moments (8) = 18 bytes. fp32 training has no separate main copy: 4 + 4 + 8 = 16.
struct BytesPerParam {
    double param = 0;
    double grad = 0;
    double optimizer = 0;  // main params + Adam moments; divided by DP with the distributed optimizer
};
BytesPerParam bytes_per_param(DType dtype);

// 18 (fp16/bf16) or 16 (fp32) without the distributed optimizer; 6 + 12/d (or 8 + 8/d)
// with it, since ZeRO-1 shards only the optimizer part over the d data-parallel ranks.
double state_bytes_per_param(DType dtype, bool distributed_optimizer, int dp);

// One transformer layer's activations for one micro-batch, per TP rank. s sequence, b
// micro-batch, h hidden, a heads, f ffn (0: 4h), t TP, e bytes of the activation dtype.
struct ActivationInputs {
    std::int64_t s = 0, b = 0, h = 0, a = 0;
    int t = 1;
    bool sequence_parallel = false;
    Recompute recompute = Recompute::None;
    bool flash_attention = false;
    DType dtype = DType::F16;
    std::int64_t f = 0;
    std::int64_t fc1 = 0;  // fc1's output width before the TP split (0: f; 2f with SwiGLU)
    std::int64_t qkv = 0;  // the saved QKV's width before the TP split (0: 3h; (np + 2 ng) hn)
    // --qk-layernorm: the query and key rows per token before the TP split (np + ng); 0: off.
    std::int64_t qk_norm_rows = 0;
    int document_arrays = 0;  // ModelShape::document_arrays
};

// What lib/model/activation_plan.cpp keeps per layer and micro-batch (R = sb rows, sb/t
// with sequence parallelism; T = sb rows always):
//   residual side (R rows): LayerNorm 1 output (the QKV input), the residual after
//     attention (LayerNorm 2 input), LayerNorm 2 output (fc1 input), the layer output
//     (next layer's input):                                   4 R h e
//   LayerNorm mean and 1/std, fp32, both LayerNorms:          16 R
//   tensor-parallel side (T rows, split by t): fused QKV 3h, context (dense input) h,
//     fc1 output (GELU input) f, GELU output (fc2 input) f:   T (4h + 2f) e / t
//     With SwiGLU fc1's output is [gate, up], 2f wide (T (4h + 3f) e / t). With grouped-
//     query attention the saved QKV is Megatron's grouped [ng, np/ng + 2, hn], (np + 2 ng)
//     hn wide instead of 3h: the attention reads each group's K/V in place (no copy per
//     head). With rope it is the rotated copy of the projection (which itself passes through
//     the workspace's wide buffer), the same width. RMSNorm keeps both statistics buffers
//     (its mean one unused); rope and bias-free linears save nothing extra.
//   --qk-layernorm: the QKV linear's output again (the norms' input; the saved QKV holds
//     their output), and the two norms' fp32 mean and 1/std per query and key row:
//     T ((np + 2 ng) hn e + 8 (np + ng)) / t
//   attention core: the fp32 softmax probabilities a s^2 b 4 / t (plain), or only the fp32
//     row log-sum-exp a s b 4 / t (flash attention); both backends keep fp32 statistics.
//   no dropout masks: they are regenerated from the counter-based RNG in backward.
// Selective recompute drops the attention core (backward refills one shared buffer); full
// recompute keeps only the layer output R h e (the next layer's recomputation input).
// At fp16 with f = 4h this is sbh (4/sp + 12/t) x 2 + 16sb/sp (+ 4as^2b/t), against
// Korthikanti's sbh (10/sp + 24/t) + 5as^2b/t: the same sixteen 2-byte tensors, without
// the 1-byte masks and the dropout output, with fp32 LayerNorm statistics and probabilities.
double activation_bytes_per_layer(const ActivationInputs& in);

// Korthikanti et al. 2022, Sec. 4 (Megatron-LM, 16-bit activations, 1-byte dropout masks),
// for comparison with the model above:
//   no TP:                 sbh (34 + 5as/h)
//   TP t:                  sbh (10 + 24/t + 5as/(ht))
//   TP t + sequence par.:  sbh/t (34 + 5as/h)
//   selective recompute:   drops the 5as/h attention-core term (also with flash attention)
//   full recompute:        2sbh (only the layer input), 2sbh/t with sequence parallelism
// fp32 activations double every 2-byte term; the 1-byte masks stay 1 byte.
double korthikanti_activation_bytes_per_layer(const ActivationInputs& in);

// Micro-batch slots each model chunk of a pipeline stage allocates (chunk 0 first): the
// most forwards of that chunk not yet matched by their backward in the stage's schedule
// (pipeline::make_schedule), as train::pipeline_slots sizes each chunk's activation arena.
// 1 without pipelining; min(p - stage, m) under 1F1B. Under the interleaved schedule the
// chunks peak at different times and share one pool of slots instead (pooled_slots).
std::vector<int> chunk_slots(int pp, int vp, int micro_batches, int stage);
// Interleaved schedules: the most micro-batch chunks alive at once over all chunks - the
// slots of the arena the chunks share.
int pooled_slots(int pp, int vp, int micro_batches, int stage);

// FP8 state of one FP8 layer on one TP rank, held through the step (bytes): the FP8 copy of
// its linear weights and a transposed FP8 copy (the data gradient's operand), 1 byte each per
// weight element (layer_linear_weights_per_rank); and per linear GEMM the scaling state of
// its three FP8 operands (input, weight, output gradient): an fp32 amax history of
// --fp8-amax-history-len steps (one amax under --fp8-recipe tensorwise), scale and scale_inv.
// Saved activations do not change: the model keeps them 16-bit and re-quantises in backward.
// 0 without FP8.
double fp8_bytes_per_layer(const ModelShape& m, int tp);

struct MemoryBreakdown {
    int stage = 0;             // the pipeline stage this breakdown is for
    double weights = 0;        // bytes
    double gradients = 0;
    double optimizer = 0;
    double activations = 0;    // saved for backward: every chunk's slots
    double buffers = 0;        // model workspace (incl. logits), distributed-optimizer scratch,
                               // communication buffers, runtime
    double fragmentation = 0;  // the device's margin on activations + workspace
    double fp8 = 0;            // the stage's FP8 layers' weight copies and scaling state
    double total() const { return weights + gradients + optimizer + activations + buffers + fragmentation + fp8; }
};

// Memory of one pipeline stage (per TP rank) for the layout.
MemoryBreakdown stage_memory(const ModelShape& m, const Layout& l, const DevicePreset& dev, int stage);
// The stage that needs the most memory; that is what has to fit.
MemoryBreakdown peak_memory(const ModelShape& m, const Layout& l, const DevicePreset& dev);

// A real run's measured memory (bytes; from the training code's allocator statistics), so a
// test can hold the model against it component by component. A component left negative is
// not compared.
struct MeasuredMemory {
    double weights = -1, gradients = -1, optimizer = -1, activations = -1, buffers = -1, total = -1;
};
struct MemoryDeviation {
    double weights = 0, gradients = 0, optimizer = 0, activations = 0, buffers = 0, total = 0;  // predicted/measured - 1
    double worst() const;  // largest |deviation| among the compared components
};
// buffers compares predicted buffers + fragmentation (everything not in the other four).
MemoryDeviation compare_memory(const MemoryBreakdown& predicted, const MeasuredMemory& measured);

}  // namespace gpt::plan
