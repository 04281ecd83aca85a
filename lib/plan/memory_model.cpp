#include "plan/memory_model.hpp"

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"

namespace gpt::plan {

namespace {
constexpr double kGiB = double(1ull << 30);
}

BytesPerParam bytes_per_param(DType dtype) {
    // Megatron's distributed-optimizer guide, "bytes per parameter": fp16/bf16 params with
    // fp32 grads: 2 + 4 + (4 main + 8 Adam); fp32: 4 + 4 + 8.
    if (dtype == DType::F32) return {4, 4, 8};
    return {2, 4, 12};
}

double state_bytes_per_param(DType dtype, bool distributed_optimizer, int dp) {
    BytesPerParam b = bytes_per_param(dtype);
    return b.param + b.grad + b.optimizer / (distributed_optimizer ? std::max(dp, 1) : 1);
}

double activation_bytes_per_layer(const ActivationInputs& in) {
    // Korthikanti et al. 2022, Sec. 4.1: per layer 34sbh + 5as^2b bytes, of which the
    // replicated-under-TP part is 10sbh (two LayerNorm inputs, the QKV and fc1 inputs: 8sbh
    // at 2 bytes, plus the two 1-byte dropout masks 2sbh), and the rest (24sbh for Q, K, V,
    // the dense input, GELU input and fc2 input; 5as^2b for softmax output, its 1-byte
    // dropout mask and dropout output) is split by TP. e scales the 2-byte terms for fp32.
    const double e = double(dtype_size(in.dtype)) / 2.0;
    const double sbh = double(in.s) * double(in.b) * double(in.h);
    const double t = in.t;
    const double sp_div = in.sequence_parallel ? t : 1.0;
    if (in.recompute == Recompute::Full) return 2.0 * e * sbh / sp_div;
    const bool keep_attention_core = in.recompute == Recompute::None && !in.flash_attention;
    const double as2b = double(in.a) * double(in.s) * double(in.s) * double(in.b);
    double replicated = (8.0 * e + 2.0) * sbh;
    double split = 24.0 * e * sbh + (keep_attention_core ? (4.0 * e + 1.0) * as2b : 0.0);
    return replicated / sp_div + split / t;
}

double layers_in_flight(int num_layers, int pp, int vp, int micro_batches, int stage) {
    GPT_ASSERT(pp > 0 && vp > 0 && stage >= 0 && stage < pp && micro_batches > 0);
    if (vp == 1) {
        int mb = std::min(pp - stage, micro_batches);
        return double(mb) * num_layers / pp;
    }
    int chunks = std::min(2 * (pp - stage - 1) + (vp - 1) * pp + 1, micro_batches * vp);
    return double(chunks) * num_layers / (double(pp) * vp);
}

MemoryBreakdown stage_memory(const ModelShape& m, const Layout& l, const DevicePreset& dev, int stage) {
    MemoryBreakdown r;
    r.stage = stage;
    const double params = double(stage_params(m, l.tp, l.pp, stage).total());
    const BytesPerParam bp = bytes_per_param(m.dtype);
    r.weights = params * bp.param;
    r.gradients = params * bp.grad;
    r.optimizer = params * bp.optimizer / (l.distributed_optimizer ? l.dp : 1);

    ActivationInputs ai{m.seq, l.micro_batch, m.hidden, m.heads, l.tp, l.sequence_parallel,
                        l.recompute, m.flash_attention, m.dtype};
    const double e = double(dtype_size(m.dtype)) / 2.0;
    const double sbh = double(m.seq) * l.micro_batch * m.hidden;
    const double sp_div = l.sequence_parallel ? l.tp : 1.0;
    const int m_count = l.micro_batches();
    const double layers = layers_in_flight(m.num_layers, l.pp, l.vp, m_count, stage);
    r.activations = activation_bytes_per_layer(ai) * layers;
    if (stage == 0) {
        // Embedding dropout mask (1 byte) for each micro-batch whose first chunk is in flight.
        double mbs_in_flight = std::ceil(layers / (double(m.num_layers) / l.pp));
        r.activations += sbh / sp_div * mbs_in_flight;
    }
    if (stage == l.pp - 1) {
        // Final LayerNorm input and output (Korthikanti 4sbh/t) and the logits of the one
        // micro-batch between its forward and backward: 16-bit logits plus the fp32 copy the
        // vocab-parallel cross entropy keeps for its gradient, V_pad/t columns per rank.
        const double vocab_shard = double(padded_vocab(m, l.tp)) / l.tp;
        r.activations += 4.0 * e * sbh / sp_div;
        r.activations += (2.0 * e + 4.0) * double(m.seq) * l.micro_batch * vocab_shard;
    }

    int groups = (l.tp > 1) + (l.dp > 1) + (l.pp > 1 ? 2 : 0);  // pp: p2p + embedding group
    double comm = groups * dev.comm_buffer_gib_per_group * kGiB;
    // Send and receive buffers for forward activations and backward gradients, scattered
    // over TP ranks (Megatron's scatter-gather p2p optimisation).
    double p2p = l.pp > 1 ? 4.0 * 2.0 * e * sbh / l.tp : 0.0;
    // The working set while one layer runs backward: the layer's full activations
    // (recomputed under full recompute), plus the sequence-parallel all-gathered input.
    ActivationInputs full = ai;
    full.recompute = Recompute::None;
    double workspace = activation_bytes_per_layer(full) + (l.sequence_parallel ? 2.0 * e * sbh : 0.0);
    r.buffers = dev.runtime_overhead_gib * kGiB + comm + p2p + workspace;
    r.fragmentation = kFragmentationFraction * (r.activations + workspace);
    return r;
}

MemoryBreakdown peak_memory(const ModelShape& m, const Layout& l, const DevicePreset& dev) {
    MemoryBreakdown best = stage_memory(m, l, dev, 0);
    // Middle stages hold fewer micro-batches than the first and no embedding or logits, so
    // the first and the last stage bound every other.
    if (l.pp > 1) {
        MemoryBreakdown last = stage_memory(m, l, dev, l.pp - 1);
        if (last.total() > best.total()) best = last;
    }
    return best;
}

double MemoryDeviation::worst() const {
    return std::max({std::abs(weights), std::abs(gradients), std::abs(optimizer), std::abs(activations),
                     std::abs(total)});
}

MemoryDeviation compare_memory(const MemoryBreakdown& p, const MeasuredMemory& m) {
    auto dev = [](double predicted, double measured) {
        return measured > 0 ? predicted / measured - 1.0 : 0.0;
    };
    return {dev(p.weights, m.weights), dev(p.gradients, m.gradients), dev(p.optimizer, m.optimizer),
            dev(p.activations, m.activations), dev(p.total(), m.total)};
}

}  // namespace gpt::plan
