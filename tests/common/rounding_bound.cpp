#include "rounding_bound.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

#include "adam_bound.hpp"
#include "model/param_layout.hpp"

namespace gpt::test {

namespace {

double gamma(double k) {
    const double u = std::ldexp(1.0, -24);
    return k * u / (1 - k * u);
}

double norm2(const std::vector<double>& v) {
    double s = 0.0;
    for (double x : v) s += x * x;
    return s;
}

}  // namespace

LayoutRounding layout_rounding(const Config& cfg) {
    const ModelConfig& m = cfg.model;
    const double h = m.hidden_size, ffn = m.ffn(), L = m.num_layers, s = m.seq_length;
    const double head_dim = h / m.num_attention_heads;
    const double qkv = h + 2.0 * m.query_groups() * head_dim;  // output columns of the QKV GEMM
    const double fc1 = (m.swiglu ? 2.0 : 1.0) * ffn;
    const double V = cfg.padded_vocab_size();
    const double N = double(cfg.training.global_batch_size) * s;  // tokens per iteration
    // Forward, per layer: QKV (k = h), scores (head_dim), context (s), projection (h), fc1
    // (h), fc2 (ffn); then the logits (h), the softmax sum over the vocabulary, the loss mean.
    double fwd = 0.0;
    for (double k : {h, head_dim, s, h, h, ffn}) fwd += L * 2 * gamma(k);
    for (double k : {h, V, N}) fwd += 2 * gamma(k);
    // Backward, per layer, the input gradients: QKV (k = qkv), scores and context (head_dim,
    // s, s, s), projection (h), fc1 (fc1), fc2 (h); the head's input gradient (V); the weight
    // gradients' sum over the tokens (N, once: a gradient ends the chain), the sequence-
    // parallel layernorm partial sums (N), the tied embedding's pair of contributions (2).
    double bwd = 0.0;
    for (double k : {qkv, head_dim, s, s, s, h, fc1, h}) bwd += L * 2 * gamma(k);
    for (double k : {V, N, N, 2.0}) bwd += 2 * gamma(k);
    return {fwd, fwd + bwd};
}

void expect_within_rounding_bound(const Run& ref, const Run& got, const Config& cfg, const std::string& what) {
    ASSERT_EQ(ref.step_grads.size(), ref.records.size()) << what << ": the reference kept no gradients";
    ASSERT_EQ(got.records.size(), ref.records.size()) << what;
    const LayoutRounding r = layout_rounding(cfg);
    const auto& o = cfg.optimizer;
    std::map<std::string, AdamDifferenceBound> bounds;
    double p2 = 0.0;
    for (const auto& [name, p] : ref.params) {
        bounds.emplace(name, AdamDifferenceBound(p.values.size(), o.adam_beta1, o.adam_beta2, o.adam_eps));
        for (float x : p.values) p2 += double(x) * x;
    }
    double dp_norm = 0.0, max_grad_norm = 0.0, worst_loss = 0.0, worst_norm = 0.0;
    for (std::size_t t = 0; t < ref.records.size(); ++t) {
        const auto &a = ref.records[t], &b = got.records[t];
        const double rho = dp_norm / std::sqrt(p2);
        const double clip = o.clip_grad > 0 ? std::min(1.0, o.clip_grad / (a.grad_norm + 1e-6)) : 1.0;
        double e2 = 0.0;
        for (auto& [name, bound] : bounds) {
            const std::vector<float>& g32 = ref.step_grads[t].at(name);
            double sq = 0.0;
            for (float x : g32) sq += double(x) * x;
            const double rms = std::sqrt(sq / double(g32.size()));
            std::vector<double> g(g32.size()), e(g32.size());
            for (std::size_t i = 0; i < g.size(); ++i) {
                const double ag = std::abs(double(g32[i]));
                e[i] = (r.total + rho) * (ag + rms) + r.total * ag;
                e2 += e[i] * e[i];
                g[i] = clip * g32[i];
                e[i] *= clip;
            }
            bound.step(g, e, a.lr);
        }
        const double loss_bound = r.forward * a.lm_loss + a.grad_norm * dp_norm;
        const double norm_bound = std::sqrt(e2);
        EXPECT_LE(std::abs(b.lm_loss - a.lm_loss), loss_bound) << what << " iteration " << t + 1;
        EXPECT_LE(std::abs(b.grad_norm - a.grad_norm), norm_bound) << what << " iteration " << t + 1;
        worst_loss = std::max(worst_loss, std::abs(b.lm_loss - a.lm_loss) / loss_bound);
        worst_norm = std::max(worst_norm, std::abs(b.grad_norm - a.grad_norm) / norm_bound);
        max_grad_norm = std::max(max_grad_norm, a.grad_norm);
        dp_norm = 0.0;
        for (const auto& [name, bound] : bounds) dp_norm += norm2(bound.parameter_bound());
        dp_norm = std::sqrt(dp_norm);
    }
    const double eval_bound = r.forward * ref.eval_loss + max_grad_norm * dp_norm;
    EXPECT_LE(std::abs(got.eval_loss - ref.eval_loss), eval_bound) << what;
    ASSERT_FALSE(got.params.empty()) << what;
    const char* head_copy = model::ParamLayout::word_embeddings_for_head();
    double worst = 0.0;
    std::string worst_name;
    for (const auto& [name, p] : got.params) {
        const std::string ref_name =
            name == head_copy ? std::string(model::ParamLayout::word_embeddings()) : name;
        ASSERT_EQ(ref.params.count(ref_name), 1u) << what << " " << name;
        const Run::Param& full = ref.params.at(ref_name);
        const std::vector<float> want = reference_slice(full, p);
        Run::Param bound_full = full;
        const std::vector<double>& b = bounds.at(ref_name).parameter_bound();
        // Through float: the slicing is shared with the values (a bound rounded down by
        // half an ulp of itself, far below its own uncertainty).
        bound_full.values.assign(b.begin(), b.end());
        const std::vector<float> bound = reference_slice(bound_full, p);
        ASSERT_EQ(want.size(), p.values.size()) << what << " " << name;
        int bad = 0;
        std::size_t first = 0;
        for (std::size_t i = 0; i < want.size(); ++i) {
            const double diff = std::abs(double(p.values[i]) - want[i]);
            if (!(diff <= bound[i]) && bad++ == 0) first = i;
            const double used = diff / bound[i];
            if (!(used <= worst)) {
                worst = used;
                worst_name = name;
            }
        }
        EXPECT_EQ(bad, 0) << what << " " << name << ": " << bad << " of " << want.size()
                          << " elements beyond the rounding bound; first " << first << ": " << p.values[first]
                          << " vs " << want[first] << " (bound " << bound[first] << ")";
    }
    std::printf("%s: used %.3g of the parameter bound (%s), %.3g of the loss bound, %.3g of the grad-norm "
                "bound (delta %.3g forward, %.3g total)\n",
                what.c_str(), worst, worst_name.c_str(), std::max(worst_loss, 0.0), worst_norm, r.forward,
                r.total);
    expect_layout_complete(got, cfg, what);
}

}  // namespace gpt::test
