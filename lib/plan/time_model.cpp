#include "plan/time_model.hpp"

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "plan/memory_model.hpp"

namespace gpt::plan {

namespace {

// Achieved GEMM throughput (FLOP/s) for one GEMM of `flops` FLOPs: the preset's large-GEMM
// efficiency, reduced for small GEMMs by a saturation curve (half of it at gemm_half_gflop).
double gemm_seconds(double flops, double peak_flops, const DevicePreset& dev) {
    if (flops <= 0) return 0;
    double w = flops / 1e9;
    double eff = dev.kernels.gemm * w / (w + dev.kernels.gemm_half_gflop);
    return flops / (peak_flops * eff);
}

// The MLP's activation is GELU (not SwiGLU or squared ReLU, which are passes of their own).
bool gelu_mlp(const ModelShape& m) { return !m.swiglu && !m.squared_relu; }

// The GEMMs that carry the GELU epilogue (fc1's forward, fc2's data gradient) run at this
// fraction of a plain GEMM's rate; 1 where bias-GELU is a pass of its own or there is no GELU.
double gelu_gemm_factor(const ModelShape& m, const DevicePreset& dev) {
    return gelu_mlp(m) && dev.kernels.gelu_epilogue > 0 ? dev.kernels.gelu_epilogue : 1.0;
}

// An FP8 layer's bias-GELU as a pass of its own after fc1's bias-only GEMM (GPT_FP8_GELU=pass,
// the default), which writes fc2's input codes too under the fused input cast.
bool fp8_gelu_pass(const ModelShape& m) { return gelu_mlp(m) && m.linear_bias && !m.fp8_gelu_epilogue; }
// Its backward (GELU with or without bias): fc2's data gradient without the dGELU epilogue,
// GELU's backward in fc1's output-gradient cast (delayed scaling with an FP8 weight
// gradient: the cast also reads the pre-activation) or a pass of its own before it.
bool fp8_gelu_backward_pass(const ModelShape& m) { return gelu_mlp(m) && !m.fp8_gelu_epilogue; }
bool fp8_dgelu_in_cast(const ModelShape& m) {
    return fp8_gelu_backward_pass(m) && m.fp8.fp8_recipe == Fp8Recipe::Delayed && m.fp8.fp8_wgrad;
}

struct MicroBatchCost {
    double compute = 0;  // GEMMs, attention and element-wise work incl. recompute
    double tp = 0;       // TP collectives
    double backward = 0; // backward share of compute (for DP overlap)
    double gemm = 0;     // GEMM share of compute: the linear layers, attention's batched GEMMs, LM head
    double gemm_fp8 = 0; // the part of it run in FP8
};

// Bytes one FP8 layer's casts move for one micro-batch, per rank: each FP8 GEMM operand is
// read in the activation type and written as FP8 (1 byte), amax computed in the same pass
// (delayed scaling; tensorwise reads the tensor once more for its amax first). Forward: the
// four GEMMs' inputs. Backward: the four output gradients (written twice with an FP8 weight
// gradient: row-wise for the data gradient, transposed for the weight gradient) and, for an
// FP8 weight gradient, the inputs again (the saved activations are 16-bit), transposed.
// With the fused input cast (fused_input_cast) the norms write QKV's and FC1's input codes in
// their own pass: those two casts cost only the codes' byte per element of the norm's rows
// (this rank's shard under sequence parallelism); so does FC2's where its input comes from
// an activation pass (SwiGLU, squared ReLU, GELU without a bias, or bias-GELU under
// fp8_gelu_pass).
struct CastBytes {
    double forward = 0, backward = 0;
};
bool fused_input_cast(const ModelShape& m) { return m.fp8.fp8_recipe == Fp8Recipe::Delayed && m.fp8_fused_input_cast; }
CastBytes fp8_cast_bytes(const ModelShape& m, const Layout& l) {
    const double e = double(dtype_size(m.dtype)), t = l.tp, bs = double(l.micro_batch) * m.seq;
    const double h = m.hidden, f = m.ffn, qkv = double(qkv_rows(m)), fc1 = double(fc1_rows(m));
    const double normed = bs * 2 * h, projection = bs * h / t, fc2 = bs * f / t;
    const double inputs = normed + projection + fc2, grads = bs * (qkv / t + h + fc1 / t + h);
    const double read = m.fp8.fp8_recipe == Fp8Recipe::Tensorwise ? 2 * e : e;
    const bool wgrad = m.fp8.fp8_wgrad;
    const bool fc2_fused = !gelu_mlp(m) || !m.linear_bias || fp8_gelu_pass(m);
    const double forward = fused_input_cast(m) ? normed / (l.sequence_parallel ? t : 1.0) + projection * (read + 1) +
                                                     fc2 * (fc2_fused ? 1.0 : read + 1)
                                               : inputs * (read + 1);
    // GELU's backward (fp8_gelu_backward_pass): the cast reads fc1's pre-activation beside its
    // output gradient, or a pass reads both and writes the gradient before the cast.
    const double dgelu = !fp8_gelu_backward_pass(m) ? 0.0 : fp8_dgelu_in_cast(m) ? fc2 * e : fc2 * 3 * e;
    return {forward, grads * (read + 1 + (wgrad ? 1 : 0)) + (wgrad ? inputs * (read + 1) : 0.0) + dgelu};
}

// Forward and backward of the layers one stage runs for one micro-batch, per rank.
MicroBatchCost stage_micro_batch_cost(const ModelShape& m, const Layout& l, const DevicePreset& dev,
                                      const Fabric& fab, const Placement& place, int stage) {
    const double b = l.micro_batch, s = m.seq, h = m.hidden, f = m.ffn, a = m.heads, t = l.tp;
    const double e = double(dtype_size(m.dtype)) / 2.0;
    const double peak = (m.dtype == DType::F32 ? dev.peak_tflops_fp32 : dev.peak_tflops_16bit) * 1e12;
    const double hbm = dev.hbm_gbps * 1e9 * dev.kernels.memory;

    // GEMMs of one layer per rank (linear_gemm_seconds); backward runs two GEMMs of the same
    // size per forward GEMM (data gradient and weight gradient).
    const double bs = b * s, qkv = double(qkv_rows(m));
    const LinearGemmSeconds lin16 = linear_gemm_seconds(m, l, dev, false);
    // Attention's s x s products, 4bs^2h/t forward and twice that backward: flash attention
    // at the kernels' rates for this head dimension (measured separately for the two passes
    // where the preset has them), the unfused core's batched GEMMs at one efficiency.
    const double attn_flops = 4 * b * s * s * h / t;
    const FlashAttentionRate flash = dev.kernels.flash(m.hidden / m.heads);
    const double attn_fwd = attn_flops / (peak * (m.flash_attention ? flash.forward : dev.kernels.attention_core));
    const double attn_bwd = m.flash_attention ? 2 * attn_flops / (peak * flash.backward) : 2 * attn_fwd;
    // Element-wise traffic per layer (bytes): LayerNorms and the two bias-dropout-add
    // (~22 e sbh, replicated across TP ranks unless sequence parallel), bias-GELU on the
    // 4h-wide fc1 output (16 e sbh/t), and without flash attention the fused scale-mask-
    // softmax plus attention dropout over the a s^2 b scores ((8e + 1) as^2b/t).
    double sp_div = l.sequence_parallel ? t : 1.0;
    double sbh = bs * h;
    double elem_core = m.flash_attention ? 0.0 : (8 * e + 1) * a * s * s * b / t;
    // SwiGLU reads 2f and writes f where bias-GELU (or squared ReLU, always a pass) reads
    // and writes f: 3/2 the traffic; the rotary embedding reads the grouped projection and
    // writes its rotated copy (attention reads each group's K/V in place, so without rope
    // there is no copy, GQA or not). A GELU in the GEMM epilogue has no pass: its cost is in
    // those GEMMs' rate (gelu_gemm_factor).
    const bool gelu_pass = !gelu_mlp(m) || dev.kernels.gelu_epilogue <= 0;
    double act_traffic = gelu_pass ? 16 * e * sbh / t * (f / (4 * h)) * (m.swiglu ? 1.5 : 1.0) : 0.0;
    double expand = m.position_table ? 0.0 : 2 * e * bs * (2 * qkv) / t;
    // --qk-layernorm: the projection copied for backward (read and write), then the query and
    // key rows, (np + ng) hn per token, read and written by the norms.
    const double hn = double(m.hidden) / m.heads, ng = m.query_groups > 0 ? m.query_groups : m.heads;
    double qk_norms = m.qk_layernorm ? 2 * e * bs * (qkv + (m.heads + ng) * hn) / t : 0.0;
    double elem_fwd = (22 * e * sbh / sp_div + act_traffic + expand + qk_norms + elem_core) / hbm;
    double core_fwd = attn_fwd + elem_core / hbm;

    // One layer of each kind: 16-bit, and FP8 (its linear GEMMs at the FP8 rate, plus the
    // casts). Backward is twice the forward's element-wise work.
    struct LayerCost {
        double fwd = 0, bwd = 0, recompute = 0, gemm = 0, gemm_fp8 = 0;
    };
    // An FP8 layer's bias-GELU pass (fp8_gelu_pass) where the 16-bit layers have it in the
    // epilogue: its traffic, as the 16-bit layers' act_traffic where GELU is a pass.
    const double fp8_gelu_traffic = !gelu_pass && fp8_gelu_pass(m) ? 16 * e * sbh / t * (f / (4 * h)) : 0.0;
    auto layer_cost = [&](const LinearGemmSeconds& lin, bool fp8) {
        const CastBytes cast = fp8 ? fp8_cast_bytes(m, l) : CastBytes{};
        LayerCost c;
        c.fwd = lin.forward + attn_fwd + elem_fwd + (cast.forward + (fp8 ? fp8_gelu_traffic : 0.0)) / hbm;
        c.bwd = lin.data_grad + lin.weight_grad + attn_bwd + 2 * elem_fwd + cast.backward / hbm;
        c.recompute = l.recompute == Recompute::Full ? c.fwd : l.recompute == Recompute::Selective ? core_fwd : 0.0;
        const double rc_lin = l.recompute == Recompute::Full ? lin.forward : 0.0;
        const double rc_attn = l.recompute == Recompute::None ? 0.0 : attn_fwd;
        c.gemm = lin.total() + rc_lin + attn_fwd + attn_bwd + rc_attn;
        if (fp8) c.gemm_fp8 = lin.forward + lin.data_grad + (m.fp8.fp8_wgrad ? lin.weight_grad : 0.0) + rc_lin;
        return c;
    };
    const LayerCost c16 = layer_cost(lin16, false);
    const int layers_here = pipeline_stage_layers(m.num_layers, l.pp, l.vp, l.split, stage);
    const int fp8_layers = fp8_layers_on_stage(m, l.pp, l.vp, stage, l.split);
    const LayerCost c8 = fp8_layers > 0 ? layer_cost(linear_gemm_seconds(m, l, dev, true), true) : LayerCost{};
    const double n16 = layers_here - fp8_layers, n8 = fp8_layers;

    // TP: two all-reduces of the b x s x h activations per layer forward and two in backward
    // (or, with sequence parallelism, two all-gather + reduce-scatter pairs: the same volume).
    // An FP8 layer with the fused input cast under sequence parallelism all-gathers 1-byte
    // codes forward instead of 16-bit activations: each all-gather + reduce-scatter pair
    // moves (1 + 2e) bytes an element where it moved 2 x 2e.
    double tp_fwd = 0, tp_fwd8 = 0;
    if (l.tp > 1) {
        double gbps = place.tp_crosses_nodes ? fab.inter_node_gbps : fab.intra_node_gbps;
        double lat = place.tp_crosses_nodes ? dev.inter_node_latency_us : dev.intra_node_latency_us;
        tp_fwd = 2 * allreduce_seconds(2 * e * sbh, l.tp, gbps, lat);
        tp_fwd8 = l.sequence_parallel && fused_input_cast(m) ? 2 * allreduce_seconds((1 + 2 * e) / 2 * sbh, l.tp, gbps, lat)
                                                            : tp_fwd;
    }
    const double recompute_fwd = l.recompute == Recompute::Full ? 1.0 : 0.0;
    const double tp_layer16 = 2 * tp_fwd + recompute_fwd * tp_fwd;
    const double tp_layer8 = tp_fwd8 + tp_fwd + recompute_fwd * tp_fwd8;

    MicroBatchCost c;
    c.compute = n16 * (c16.fwd + c16.bwd + c16.recompute) + n8 * (c8.fwd + c8.bwd + c8.recompute);
    c.backward = n16 * c16.bwd + n8 * c8.bwd;
    c.gemm = n16 * c16.gemm + n8 * c8.gemm;
    c.gemm_fp8 = n8 * c8.gemm_fp8;
    c.tp = n16 * tp_layer16 + n8 * tp_layer8;
    if (!fab.fused_grad_accumulation) {
        // Every micro-batch's backward adds the stage's weight gradients (activation type)
        // into the fp32 main gradients: read both, write the fp32 sum. At micro-batch 1 this
        // pass costs about a tenth of the layers' GEMM time on A100 (10 bytes per parameter
        // at HBM speed against 8 b s FLOPs per parameter with full recompute).
        const double grad_bytes = double(dtype_size(m.dtype)) + 4.0 + 4.0;
        const double accumulate = double(stage_params(m, l.tp, l.pp, stage, l.split, l.vp).total()) * grad_bytes / hbm;
        c.compute += accumulate;
        c.backward += accumulate;
    }
    if (stage == 0) {
        // Embedding lookup, dropout and the gradient scatter-add: memory-bound, ~3 passes.
        c.compute += 3 * 2 * e * sbh / hbm;
    }
    if (stage == l.pp - 1) {
        // LM head GEMM (forward, then data and weight gradients) and the vocab-parallel cross
        // entropy's passes over the logits, plus its three small all-reduces over TP.
        double vocab_shard = double(padded_vocab(m, l.tp)) / l.tp;
        double head = gemm_seconds(2 * bs * h * vocab_shard, peak, dev);
        double ce = 3 * (2 * e + 4) * bs * vocab_shard / hbm;
        c.compute += 3 * head + ce;
        c.backward += 2 * head;
        c.gemm += 3 * head;
        if (l.tp > 1) {
            double gbps = place.tp_crosses_nodes ? fab.inter_node_gbps : fab.intra_node_gbps;
            double lat = place.tp_crosses_nodes ? dev.inter_node_latency_us : dev.intra_node_latency_us;
            c.tp += 3 * allreduce_seconds(4 * bs, l.tp, gbps, lat);
        }
    }
    return c;
}

}  // namespace

LinearGemmSeconds linear_gemm_seconds(const ModelShape& m, const Layout& l, const DevicePreset& dev, bool fp8) {
    const double peak16 = (m.dtype == DType::F32 ? dev.peak_tflops_fp32 : dev.peak_tflops_16bit) * 1e12;
    const double peak8 = dev.peak_tflops_fp8 * 1e12;
    GPT_ASSERT(!fp8 || peak8 > 0, "FP8 GEMMs on ", dev.name, ", which has no FP8 peak");
    const double bs = double(l.micro_batch) * m.seq, h = m.hidden, f = m.ffn, t = l.tp;
    const double qkv = double(qkv_rows(m)), fc1 = double(fc1_rows(m));
    // fc1's forward and fc2's data gradient carry the GELU epilogue (gelu_gemm_factor); the
    // weight gradients are plain. An FP8 layer's fc1 under fp8_gelu_pass adds the bias only,
    // and its fc2's data gradient under fp8_gelu_backward_pass has no dGELU epilogue.
    const double gelu = gelu_gemm_factor(m, dev);
    const double fc1_forward = fp8 && fp8_gelu_pass(m) ? 1.0 : gelu;
    const double fc2_data_grad = fp8 && fp8_gelu_backward_pass(m) ? 1.0 : gelu;
    auto four = [&](double peak, double fc1_factor, double fc2_factor) {
        return gemm_seconds(2 * bs * h * qkv / t, peak, dev) + gemm_seconds(2 * bs * h * h / t, peak, dev) +
               gemm_seconds(2 * bs * h * fc1 / t, peak, dev) / fc1_factor +
               gemm_seconds(2 * bs * h * f / t, peak, dev) / fc2_factor;
    };
    const double peak_fd = fp8 ? peak8 : peak16;
    const double wgrad_peak = fp8 && m.fp8.fp8_wgrad ? peak8 : peak16;
    return {four(peak_fd, fc1_forward, 1.0), four(peak_fd, 1.0, fc2_data_grad), four(wgrad_peak, 1.0, 1.0)};
}

void require_fp8_device(const ModelShape& m, const DevicePreset& dev) {
    GPT_REQUIRE(!m.fp8.enabled() || dev.peak_tflops_fp8 > 0, UsageError, "--fp8-format ", m.fp8.fp8_format,
                ": the planner's device ", dev.name,
                " has no FP8 tensor cores (FP8 GEMMs need Hopper). HINT: --plan-device h100-80gb or h200");
}

double layer_gemm_flops(const ModelShape& m, int micro_batch) {
    const double bs = double(micro_batch) * m.seq, h = m.hidden, f = m.ffn;
    return 2 * bs * h * (double(qkv_rows(m)) + h + double(fc1_rows(m)) + f);
}

double layer_attention_flops(const ModelShape& m, int micro_batch) {
    return 4.0 * micro_batch * double(m.seq) * m.seq * m.hidden;
}

double logits_flops(const ModelShape& m, int micro_batch, int tp) {
    return 2.0 * micro_batch * double(m.seq) * m.hidden * double(padded_vocab(m, tp));
}

double model_flops_per_iteration(const ModelShape& m, int global_batch, int tp) {
    double layer = layer_gemm_flops(m, global_batch) + layer_attention_flops(m, global_batch);
    return 3 * (m.num_layers * layer + logits_flops(m, global_batch, tp));
}

double hardware_flops_per_iteration(const ModelShape& m, const Layout& l) {
    double extra = 0;
    if (l.recompute == Recompute::Full)
        extra = m.num_layers * (layer_gemm_flops(m, l.global_batch) + layer_attention_flops(m, l.global_batch));
    else if (l.recompute == Recompute::Selective)
        extra = m.num_layers * layer_attention_flops(m, l.global_batch);
    return model_flops_per_iteration(m, l.global_batch, l.tp) + extra;
}

Fabric default_fabric(const DevicePreset& dev) { return {dev.intra_node_gbps, dev.inter_node_gbps, true}; }

// Latency grows with log2(n): NCCL pipelines large messages through a ring (bandwidth term)
// and uses tree / low-latency protocols where the start-up cost dominates.
double startup_seconds(int n, double latency_us) { return std::ceil(std::log2(double(n))) * latency_us * 1e-6; }

double allreduce_seconds(double bytes, int n, double gbps, double latency_us) {
    if (n <= 1 || bytes <= 0) return 0;
    GPT_ASSERT(gbps > 0);
    return 2.0 * (n - 1) / n * bytes / (gbps * 1e9) + startup_seconds(n, latency_us);
}

double allgather_seconds(double bytes, int n, double gbps, double latency_us) {
    if (n <= 1 || bytes <= 0) return 0;
    GPT_ASSERT(gbps > 0);
    return double(n - 1) / n * bytes / (gbps * 1e9) + startup_seconds(n, latency_us);
}

TimeBreakdown iteration_time(const ModelShape& m, const Layout& l, const DevicePreset& dev, const Fabric& fab,
                             const Placement& place) {
    GPT_ASSERT(l.micro_batches() >= 1);
    const double e = double(dtype_size(m.dtype)) / 2.0;
    MicroBatchCost first = stage_micro_batch_cost(m, l, dev, fab, place, 0);
    MicroBatchCost slow = first;
    int slow_stage = 0;
    // Even stages: a middle stage does the same layers without the embedding or the head,
    // so the first or the last is the slowest. Uneven ones: any stage may be.
    double all_stages = first.compute + first.tp;
    for (int stage = 1; stage < l.pp; ++stage) {
        if (stage < l.pp - 1 && !l.split.any()) continue;
        MicroBatchCost here = stage_micro_batch_cost(m, l, dev, fab, place, stage);
        all_stages += here.compute + here.tp;
        if (here.compute + here.tp > slow.compute + slow.tp) {
            slow = here;
            slow_stage = stage;
        }
    }
    // p2p: each of the v chunks sends its output forward and receives a gradient back, the
    // b x s x h tensor scattered over TP ranks.
    double p2p_mb = 0;
    if (l.pp > 1) {
        double gbps = place.pp_crosses_nodes ? fab.inter_node_gbps : fab.intra_node_gbps;
        double lat = place.pp_crosses_nodes ? dev.inter_node_latency_us : dev.intra_node_latency_us;
        double bytes = 2 * e * double(l.micro_batch) * m.seq * m.hidden / l.tp;
        p2p_mb = 2.0 * l.vp * (bytes / (gbps * 1e9) + lat * 1e-6);
    }
    const double mcount = l.micro_batches();
    TimeBreakdown t;
    t.compute = mcount * slow.compute;
    t.gemm = mcount * slow.gemm;
    t.gemm_fp8 = mcount * slow.gemm_fp8;
    if (const int fp8_layers = fp8_layers_on_stage(m, l.pp, l.vp, slow_stage, l.split); fp8_layers > 0) {
        // The FP8 weights and their transposes, cast once per iteration (the first
        // micro-batch; the others reuse them): read the 16-bit weight, write two FP8 copies.
        const double read = m.fp8.fp8_recipe == Fp8Recipe::Tensorwise ? 4 * e : 2 * e;
        t.compute += fp8_layers * double(layer_linear_weights_per_rank(m, l.tp)) * (read + 2) /
                     (dev.hbm_gbps * 1e9 * dev.kernels.memory);
    }
    t.tp_comm = mcount * slow.tp;
    t.pp_p2p = mcount * p2p_mb;
    // Narayanan et al. 2021, Sec. 2.2: the bubble is (p - 1)/v micro-batch slots of the
    // slowest stage. With uneven stages the fill and drain pass through each other stage
    // once at its own pace: (the sum of the stages' times - the slowest's)/v.
    t.pp_bubble = l.split.any() ? (all_stages - (slow.compute + slow.tp) + double(l.pp - 1) * p2p_mb) / l.vp
                                : double(l.pp - 1) / l.vp * (slow.compute + slow.tp + p2p_mb);

    // Data parallel: fp32 gradients all-reduced (or reduce-scattered, then the 16-bit
    // parameters all-gathered, with the distributed optimizer) over d ranks.
    const BytesPerParam bp = bytes_per_param(m.dtype);
    const double params = double(stage_params(m, l.tp, l.pp, slow_stage, l.split, l.vp).total());
    double dp_gbps = place.dp_crosses_nodes ? fab.inter_node_gbps : fab.intra_node_gbps;
    double dp_lat = place.dp_crosses_nodes ? dev.inter_node_latency_us : dev.intra_node_latency_us;
    double grad_sync = 0, param_sync = 0;
    if (l.distributed_optimizer) {
        grad_sync = allgather_seconds(params * bp.grad, l.dp, dp_gbps, dp_lat);  // reduce-scatter: same volume
        param_sync = allgather_seconds(params * bp.param, l.dp, dp_gbps, dp_lat);
    } else {
        grad_sync = allreduce_seconds(params * bp.grad, l.dp, dp_gbps, dp_lat);
    }
    // Buckets reduce while the last micro-batch's backward still runs (when overlapped).
    double window = fab.overlap_grad_reduce ? slow.backward : 0.0;
    double embed_sync = 0;
    if (l.pp > 1) {
        // Tied embedding: first and last stage all-reduce the word-embedding gradient.
        double gbps = place.pp_crosses_nodes ? fab.inter_node_gbps : fab.intra_node_gbps;
        double lat = place.pp_crosses_nodes ? dev.inter_node_latency_us : dev.intra_node_latency_us;
        double shard = double(padded_vocab(m, l.tp)) / l.tp * m.hidden;
        embed_sync = allreduce_seconds(shard * bp.grad, 2, gbps, lat);
    }
    t.dp_exposed = std::max(0.0, grad_sync - window) + param_sync + embed_sync;

    // Adam over the local shard, memory-bound: fp32 grad read + norm pass (8), main param,
    // m and v read and written (24), 16-bit parameter written (2); fp32 training has no
    // main copy but writes the fp32 parameter itself.
    double bytes_per = m.dtype == DType::F32 ? 32.0 : 34.0;
    double local = params / (l.distributed_optimizer ? l.dp : 1);
    t.optimizer = local * bytes_per / (dev.hbm_gbps * 1e9 * dev.kernels.memory);
    return t;
}

}  // namespace gpt::plan
