#include "train/monitor/iteration_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gpt::train {

double model_flops_per_iteration(const ModelConfig& m, std::int64_t V, std::int64_t batch) {
    // Megatron's formula: 3 (fwd + 2x bwd) x 2 (FMA) x 2 (QK^T and attn x V / both GEMMs)
    // over attention projections, attention scores, MLP and the LM head.
    // As Megatron's num_floating_point_operations, grouped-query attention shrinks the K/V
    // projections to groups/heads and SwiGLU's three MLP GEMMs are 3/2 of GELU's two.
    const double B = static_cast<double>(batch), s = m.seq_length, l = m.num_layers,
                 h = m.hidden_size, f = m.ffn();
    const double kv = m.group_query_attention
                          ? static_cast<double>(m.num_query_groups) / m.num_attention_heads
                          : 1.0;
    const double gated = m.swiglu ? 1.5 : 1.0;
    return 12.0 * B * s * l * h * h *
           ((1.0 + kv + s / h) + f / h * gated + static_cast<double>(V) / (2.0 * l * h));
}

namespace {
std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}
std::string fmti(const char* f, long long v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}
}  // namespace

std::string format_iteration_line(const IntervalStats& s) {
    std::string out = " iteration " + fmti("%8lld", s.iteration) + "/" + fmti("%8lld", s.train_iters) + " |";
    out += " consumed samples: " + fmti("%12lld", s.consumed_samples) + " |";
    out += " elapsed time per iteration (ms): " + fmt("%.1f", s.elapsed_ms_per_iteration) + " |";
    out += " throughput per GPU (TFLOP/s/GPU): " + fmt("%.1f", s.tflops_per_gpu) + " |";
    out += " learning rate: " + fmt("%.6E", s.learning_rate) + " |";
    out += " global batch size: " + fmti("%5lld", s.global_batch_size) + " |";
    if (s.lm_loss) out += " lm loss: " + fmt("%.6E", *s.lm_loss) + " |";
    out += " loss scale: " + fmt("%.1f", s.loss_scale) + " |";
    if (s.grad_norm) out += " grad norm: " + fmt("%.3f", *s.grad_norm) + " |";
    // Megatron prints its count as a float ("num zeros: 1234.0"); this one is exact.
    if (s.num_zeros) out += " num zeros: " + fmt("%.1f", static_cast<double>(*s.num_zeros)) + " |";
    if (s.params_norm) out += " params norm: " + fmt("%.3f", *s.params_norm) + " |";
    out += " number of skipped iterations: " + fmti("%3lld", s.skipped_iterations) + " |";
    out += " number of nan iterations: " + fmti("%3lld", s.nan_iterations) + " |";
    return out;
}

std::string format_validation_block(const std::string& prefix, double lm_loss) {
    std::string line = " validation loss at " + prefix + " | ";
    line += "lm loss value: " + fmt("%.6E", lm_loss) + " | ";
    line += "lm loss PPL: " + fmt("%.6E", std::exp(std::min(20.0, lm_loss))) + " | ";
    const std::string dashes(line.size() + 1, '-');
    return dashes + "\n" + line + "\n" + dashes;
}

}  // namespace gpt::train
