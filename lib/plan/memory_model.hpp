// Predicted memory per device: weights, gradients and optimizer state (Megatron's bytes per
// parameter), activations (Korthikanti et al. 2022) for the micro-batches in flight under
// 1F1B / interleaved 1F1B, and buffers (communication, workspace, fragmentation margin).
#pragma once

#include <cstdint>

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

// Activation bytes one transformer layer keeps for the backward pass of one micro-batch,
// per TP rank (Korthikanti et al. 2022, Sec. 4, 16-bit activations, 1-byte dropout masks):
//   no TP:                 sbh (34 + 5as/h)
//   TP t:                  sbh (10 + 24/t + 5as/(ht))
//   TP t + sequence par.:  sbh/t (34 + 5as/h)
//   selective recompute:   drops the 5as/h attention-core term (also when flash attention
//                          never materialises the s x s scores)
//   full recompute:        2sbh (only the layer input), 2sbh/t with sequence parallelism
// fp32 activations double every 2-byte term; the 1-byte masks (2sbh + as^2b of the above)
// stay 1 byte.
struct ActivationInputs {
    std::int64_t s = 0, b = 0, h = 0, a = 0;
    int t = 1;
    bool sequence_parallel = false;
    Recompute recompute = Recompute::None;
    bool flash_attention = false;
    DType dtype = DType::F16;
};
double activation_bytes_per_layer(const ActivationInputs& in);

// Micro-batch model chunks a pipeline rank holds activations for at its peak, from the
// warm-up depth of the schedules (Narayanan et al. 2021; Megatron's schedules.py):
// 1F1B: min(p - rank, m) micro-batches of the stage's L/p layers;
// interleaved with v chunks: min(2(p - rank - 1) + (v - 1)p + 1, m v) chunks of L/(pv)
// layers, which at rank 0 gives Korthikanti's factor L (1 + (p - 1)/(p v)).
// Returns the number of layers' worth of activations held.
double layers_in_flight(int num_layers, int pp, int vp, int micro_batches, int stage);

struct MemoryBreakdown {
    int stage = 0;             // the pipeline stage this breakdown is for
    double weights = 0;        // bytes
    double gradients = 0;
    double optimizer = 0;
    double activations = 0;    // layers in flight + embedding-dropout masks + logits
    double buffers = 0;        // communication, p2p, runtime, one layer's transient workspace
    double fragmentation = 0;  // margin on the allocations that churn (activations + workspace)
    double total() const { return weights + gradients + optimizer + activations + buffers + fragmentation; }
};

// Fraction of churning allocations (activations, transient workspace) reserved as the
// allocator's fragmentation margin. Parameters, gradients and optimizer state live in flat
// buffers (DESIGN.md: model/optim) and do not fragment.
inline constexpr double kFragmentationFraction = 0.10;

// Memory of one pipeline stage (per TP rank) for the layout.
MemoryBreakdown stage_memory(const ModelShape& m, const Layout& l, const DevicePreset& dev, int stage);
// The stage that needs the most memory; that is what has to fit.
MemoryBreakdown peak_memory(const ModelShape& m, const Layout& l, const DevicePreset& dev);

// A real run's measured memory (bytes; from the training code's allocator statistics), so a
// test can hold the model against it component by component. A component left negative is
// not compared.
struct MeasuredMemory {
    double weights = -1, gradients = -1, optimizer = -1, activations = -1, total = -1;
};
struct MemoryDeviation {
    double weights = 0, gradients = 0, optimizer = 0, activations = 0, total = 0;  // predicted/measured - 1
    double worst() const;  // largest |deviation| among the compared components
};
MemoryDeviation compare_memory(const MemoryBreakdown& predicted, const MeasuredMemory& measured);

}  // namespace gpt::plan
