#include "plan/memory_model.hpp"

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "pipeline/schedule.hpp"

namespace gpt::plan {

namespace {
constexpr double kGiB = double(1ull << 30);

// Rows of one micro-batch: T tokens on the tensor-parallel side, R on the residual side.
struct Rows {
    double T = 0, R = 0;
};
Rows rows_of(const ActivationInputs& in) {
    const double T = double(in.s) * double(in.b);
    return {T, in.sequence_parallel ? T / in.t : T};
}

double ffn_of(const ActivationInputs& in) { return double(in.f > 0 ? in.f : 4 * in.h); }
double fc1_of(const ActivationInputs& in) { return in.fc1 > 0 ? double(in.fc1) : ffn_of(in); }
double qkv_of(const ActivationInputs& in) { return in.qkv > 0 ? double(in.qkv) : 3.0 * double(in.h); }

// The attention kernels' saved statistics (backend attention_saved_bytes): fp32
// probabilities [b, a/t, s, s], or the fp32 log-sum-exp [b, a/t, s] with flash attention.
double attention_core_bytes(const ActivationInputs& in) {
    const double rows = double(in.b) * (double(in.a) / in.t) * double(in.s);
    return 4.0 * rows * (in.flash_attention ? 1.0 : double(in.s));
}

// Every buffer a kept (not recomputed) layer saves, with or without its attention core.
double layer_saved_bytes(const ActivationInputs& in, bool attention_core) {
    const double e = double(dtype_size(in.dtype)), h = double(in.h);
    const Rows r = rows_of(in);
    const double qk_norms = in.qk_norm_rows > 0 ? r.T * (qkv_of(in) * e + 8.0 * double(in.qk_norm_rows)) / in.t : 0.0;
    return r.R * (4.0 * h * e + 16.0) + r.T * (qkv_of(in) + h + fc1_of(in) + ffn_of(in)) * e / in.t + qk_norms +
           (attention_core ? attention_core_bytes(in) : 0.0);
}

// One model chunk of a stage, as train::pipeline_chunk_spec assigns virtual stages.
struct ChunkShape {
    int layers = 0;
    bool pre_process = false, post_process = false;
    int slots = 1;
};

// Full recompute of a chunk of `layers` layers (model/recompute_plan.cpp): how many layers
// are recomputed and how many the largest recomputed group holds. Uniform: groups of n,
// all recomputed; block: the first n layers, one group each.
struct RecomputeGroups {
    int recomputed_layers = 0, groups = 0, set_layers = 0;
};
RecomputeGroups recompute_groups(const ActivationInputs& in, int layers, int n, bool block) {
    if (in.recompute != Recompute::Full) return {};
    n = std::min(std::max(n, 1), layers);
    if (block) return {n, n, 1};
    return {layers, (layers + n - 1) / n, n};
}

// What one micro-batch slot of the chunk keeps (ActivationPlan's SlotSaved): the chunk
// input, the tokens (first chunk) or targets, final LayerNorm statistics and output (last
// chunk), the documents' positions and first keys (every chunk, where asked for), and its
// layers: kept layers whole, of recomputed groups only the last output.
double slot_bytes(const ActivationInputs& in, const ChunkShape& c, const RecomputeGroups& g) {
    const double e = double(dtype_size(in.dtype)), h = double(in.h);
    const Rows r = rows_of(in);
    double bytes = r.R * h * e;
    if (in.recompute == Recompute::Full)
        bytes += g.groups * r.R * h * e + (c.layers - g.recomputed_layers) * layer_saved_bytes(in, true);
    else
        bytes += c.layers * activation_bytes_per_layer(in);
    if (c.pre_process) bytes += 4.0 * r.T;
    if (c.post_process) bytes += 4.0 * r.T + 8.0 * r.R + r.R * h * e;
    bytes += 4.0 * r.T * in.document_arrays;
    return bytes;
}

// The chunk's shared workspace (ActivationPlan's Workspace and recompute buffers): the
// residual-stream gradient, two (T, h) and one wide (T, max(QKV width, fc1 width)/t) transient, the
// all-gathered LayerNorm output under sequence parallelism, on the last chunk the logits
// (T, V/t) with five fp32 per-row loss statistics; the one attention core selective
// recompute refills, or the largest group full recompute re-runs (all but its output).
double workspace_bytes(const ActivationInputs& in, const ChunkShape& c, const RecomputeGroups& g,
                       double vocab_shard) {
    const double e = double(dtype_size(in.dtype)), h = double(in.h);
    const Rows r = rows_of(in);
    double bytes = r.R * h * e + 2.0 * r.T * h * e + r.T * std::max(qkv_of(in), fc1_of(in)) / in.t * e;
    if (in.sequence_parallel) bytes += r.T * h * e;
    if (c.post_process) bytes += r.T * vocab_shard * e + 5.0 * 4.0 * r.T;
    if (in.recompute == Recompute::Selective) bytes += attention_core_bytes(in);
    if (g.set_layers > 0) bytes += g.set_layers * layer_saved_bytes(in, true) - r.R * h * e;
    return bytes;
}

}  // namespace

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

double fp8_bytes_per_layer(const ModelShape& m, int tp) {
    if (!m.fp8.enabled()) return 0.0;
    const double weight_copies = 2.0 * double(layer_linear_weights_per_rank(m, tp));
    // On the device (model::Fp8Linears): each operand's amax, scale and 1/scale; delayed
    // scaling's history lives on the host.
    constexpr int kLinearGemms = 4, kOperands = 3;
    return weight_copies + kLinearGemms * kOperands * 4.0 * 3;
}

// model::Fp8Linears' activation buffers, one set per model chunk with FP8 layers: the codes
// of a linear's input and output gradient and their transposes, tokens x the widest linear
// dimension each (1 byte per element).
double fp8_workspace_bytes(const ModelShape& m, const Layout& l) {
    if (!m.fp8.enabled()) return 0.0;
    const double tokens = double(l.micro_batch) * m.seq;
    const double widest = std::max({double(m.hidden), double(qkv_rows(m)) / l.tp, double(fc1_rows(m)) / l.tp});
    return 4.0 * tokens * widest * l.vp;
}

double activation_bytes_per_layer(const ActivationInputs& in) {
    if (in.recompute == Recompute::Full) return rows_of(in).R * double(in.h) * double(dtype_size(in.dtype));
    return layer_saved_bytes(in, in.recompute == Recompute::None);
}

double korthikanti_activation_bytes_per_layer(const ActivationInputs& in) {
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

std::vector<int> chunk_slots(int pp, int vp, int micro_batches, int stage) {
    GPT_ASSERT(pp > 0 && vp > 0 && stage >= 0 && stage < pp && micro_batches > 0);
    if (pp == 1) return std::vector<int>(static_cast<std::size_t>(vp), 1);  // F0 B0 F1 B1 ...
    if (vp == 1) return {std::min(pp - stage, micro_batches)};               // warm-up + 1
    // Interleaved: count per chunk along the schedule (its length is 2 m v).
    std::vector<int> live(static_cast<std::size_t>(vp), 0), most(static_cast<std::size_t>(vp), 1);
    for (const pipeline::Action& a : pipeline::make_schedule(pp, stage, micro_batches, vp)) {
        int& n = live[static_cast<std::size_t>(a.chunk)];
        n += a.pass == pipeline::Pass::Forward ? 1 : -1;
        most[static_cast<std::size_t>(a.chunk)] = std::max(most[static_cast<std::size_t>(a.chunk)], n);
    }
    return most;
}

int pooled_slots(int pp, int vp, int micro_batches, int stage) {
    GPT_ASSERT(pp > 0 && vp > 0 && stage >= 0 && stage < pp && micro_batches > 0);
    if (pp == 1) return 1;
    int live = 0, most = 1;
    for (const pipeline::Action& a : pipeline::make_schedule(pp, stage, micro_batches, vp)) {
        live += a.pass == pipeline::Pass::Forward ? 1 : -1;
        most = std::max(most, live);
    }
    return most;
}

MemoryBreakdown stage_memory(const ModelShape& m, const Layout& l, const DevicePreset& dev, int stage) {
    const std::vector<int> chunk_layers = pipeline_chunk_layers(m.num_layers, l.pp, l.vp, l.split);
    MemoryBreakdown r;
    r.stage = stage;
    const double params = double(stage_params(m, l.tp, l.pp, stage, l.split, l.vp).total());
    const BytesPerParam bp = bytes_per_param(m.dtype);
    const int dp_shards = l.distributed_optimizer ? l.dp : 1;
    r.weights = params * bp.param;
    r.gradients = params * bp.grad;
    r.optimizer = params * bp.optimizer / dp_shards;

    ActivationInputs ai{m.seq, l.micro_batch, m.hidden, m.heads, l.tp, l.sequence_parallel && l.tp > 1,
                        l.recompute, m.flash_attention, m.dtype, m.ffn, fc1_rows(m), qkv_rows(m),
                        m.qk_layernorm ? m.heads + (m.query_groups > 0 ? m.query_groups : m.heads) : 0,
                        m.document_arrays};
    const double vocab_shard = double(padded_vocab(m, l.tp)) / l.tp;
    // The most over every micro-batch count the run's iterations take (a ramp's smaller ones).
    std::vector<int> slots = chunk_slots(l.pp, l.vp, std::max(l.micro_batches(), 1), stage);
    int pooled = l.vp > 1 ? pooled_slots(l.pp, l.vp, std::max(l.micro_batches(), 1), stage) : 0;
    for (const std::int64_t m : l.ramp_micro_batches) {
        const std::vector<int> s = chunk_slots(l.pp, l.vp, static_cast<int>(m), stage);
        for (std::size_t c = 0; c < slots.size(); ++c) slots[c] = std::max(slots[c], s[c]);
        if (l.vp > 1) pooled = std::max(pooled, pooled_slots(l.pp, l.vp, static_cast<int>(m), stage));
    }
    double workspace = 0, largest_slot = 0;
    for (int c = 0; c < l.vp; ++c) {
        const int vstage = c * l.pp + stage;  // Megatron's interleaved assignment
        ChunkShape chunk{chunk_layers[static_cast<std::size_t>(vstage)], vstage == 0, vstage == l.pp * l.vp - 1,
                         slots[static_cast<std::size_t>(c)]};
        const RecomputeGroups g = recompute_groups(ai, chunk.layers, l.recompute_layers, l.recompute_block);
        largest_slot = std::max(largest_slot, slot_bytes(ai, chunk, g));
        workspace += workspace_bytes(ai, chunk, g, vocab_shard);
    }
    // One chunk: its own slots. Interleaved: the chunks share one pool of slots
    // (train::SharedActivations), as many as micro-batch chunks are ever alive at once,
    // each as large as the largest chunk's.
    const int live = l.vp > 1 ? pooled : slots.front();
    r.activations = live * largest_slot;

    // Collective-library buffers per communicator. Pipeline send/receive buffers are host
    // memory (pipeline::execute), not the device's.
    const int groups = (l.tp > 1) + (l.dp > 1) + (l.pp > 1 ? 2 : 0);  // pp: p2p + embedding group
    const double comm = groups * dev.comm_buffer_gib_per_group * kGiB;
    r.buffers = dev.runtime_overhead_gib * kGiB + comm + workspace;
    r.fragmentation = dev.fragmentation_fraction * (r.activations + workspace);
    const int fp8_layers = fp8_layers_on_stage(m, l.pp, l.vp, stage, l.split);
    r.fp8 = fp8_layers * fp8_bytes_per_layer(m, l.tp) + (fp8_layers > 0 ? fp8_workspace_bytes(m, l) : 0.0);
    return r;
}

MemoryBreakdown peak_memory(const ModelShape& m, const Layout& l, const DevicePreset& dev) {
    MemoryBreakdown best = stage_memory(m, l, dev, 0);
    // Middle stages hold fewer micro-batches than the first and no embedding or logits, so
    // the first and the last stage bound every other. Not under --first-last-layers-bf16:
    // the middle stages hold more FP8 layers, so each stage is looked at.
    const bool uneven_fp8 = m.fp8.enabled() && m.fp8.first_last_layers_bf16;
    for (int stage = uneven_fp8 ? 1 : l.pp - 1; stage < l.pp && l.pp > 1; ++stage) {
        MemoryBreakdown other = stage_memory(m, l, dev, stage);
        if (other.total() > best.total()) best = other;
    }
    return best;
}

double MemoryDeviation::worst() const {
    return std::max({std::abs(weights), std::abs(gradients), std::abs(optimizer), std::abs(activations),
                     std::abs(buffers), std::abs(total)});
}

MemoryDeviation compare_memory(const MemoryBreakdown& p, const MeasuredMemory& m) {
    auto dev = [](double predicted, double measured) {
        return measured > 0 ? predicted / measured - 1.0 : 0.0;
    };
    return {dev(p.weights, m.weights),       dev(p.gradients, m.gradients),
            dev(p.optimizer, m.optimizer),   dev(p.activations, m.activations),
            dev(p.buffers + p.fragmentation, m.buffers), dev(p.total(), m.total)};
}

}  // namespace gpt::plan
