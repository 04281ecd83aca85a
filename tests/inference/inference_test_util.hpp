// A tiny model for the lib/inference tests: the model tests' configuration with room to
// generate (24 positions), parameters with noise on every element so the logits are far
// from uniform and the argmax is not decided by rounding.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "model_test_util.hpp"
#include "inference/kv_model.hpp"

namespace gpt::test {

// The architectures generation runs: "gpt" (GPT-2's layer), "llama" (rope, RMSNorm, SwiGLU,
// 4 heads in 2 K/V groups, untied output, no linear biases) and "llama_partial" (the same
// with biases, rope on half of each head's dims, interleaved pairs, one K/V group, and
// Nemotron's squared ReLU MLP instead of SwiGLU and its norms' 1 + weight, and --qk-layernorm).
// Rotary base 100: every rotary pair turns noticeably within the 24 positions.

inline ModelConfig inference_config(const std::string& arch) {
    ModelConfig c = arch == "gpt" ? tiny::model() : tiny::llama_model();
    c.max_position_embeddings = 24;
    if (arch == "llama_partial") {
        c.disable_bias_linear = false;
        c.rotary_percent = 0.5;
        c.rotary_interleaved = true;
        c.num_query_groups = 1;
        c.swiglu = false;
        c.squared_relu = true;
        c.apply_layernorm_1p = true;
        c.qk_layernorm = true;
    }
    return c;
}

inline model::ModelDims inference_dims(int tp_size = 1, int tp_rank = 0, const std::string& arch = "gpt") {
    return model::make_model_dims(inference_config(arch), 50, tp_size, tp_rank);  // vocab 50, padded to 64 (x TP)
}

inline std::vector<float> inference_params(const model::ModelDims& d, unsigned seed) {
    const model::ParamLayout layout(d, model::ChunkSpec{0, d.num_layers, true, true});
    std::vector<float> p(static_cast<std::size_t>(layout.total_elements()), 0.0f);
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.0f, 0.3f);
    for (const auto& e : layout.entries())
        for (std::int64_t i = 0; i < e.numel; ++i)
            p[static_cast<std::size_t>(e.offset + i)] = (e.init == model::ParamInit::One ? 1.0f : 0.0f) + n(rng);
    return p;
}

// Bound on how far two runs of the inference forward that differ only in the order of fp32
// sums (two backends; cached steps vs fresh passes) may move a logit. Both run the same ops
// on the same stored (rounded) parameters, and each op rounds its output to the storage
// precision u. On the path to a logit there are r ~= 25 such roundings (embedding; per layer
// layernorm, QKV, scores, probabilities, context, dense, residual add, layernorm, fc1+GeLU,
// fc2, residual add = 11, two layers; final layernorm and the head); each may round the other
// way (relative u) and perturbs what follows by its relative size times the layer's gain,
// O(1) after the layernorms. The worst case, all r in one direction, is 2 r u max|logit|;
// the roundings are independent, and Higham & Mary's probabilistic analysis (SIAM J. Sci.
// Comput. 41(5), 2019: error <= lambda sqrt(r) u except with probability
// <= 2 exp(-lambda^2 / 2)) gives lambda sqrt(r) u max|logit| = 15 u max|logit| with
// lambda = 3. (Measured: fp16 0.34 u max|logit|, bf16 0.6 u max|logit|.) In fp32 the
// outputs are the sums' own rounding: test_kv_model.cpp's 1e-4 on |logits| ~ 5 applies.
// The Llama-style layer rounds 13 times (RMSNorm, QKV, the rotated expand, scores,
// probabilities, context, dense, residual add, RMSNorm, fc1, SwiGLU, fc2, residual add):
// r = 1 + 2 x 13 + 2 = 29 (roundings_of).
inline int roundings_of(const model::ModelDims& d) { return d.rope || d.swiglu ? 29 : 25; }

inline double rounding_tolerance(DType t, double max_abs_logit, int roundings = 25) {
    const double lambda_sqrt_r = 3.0 * std::sqrt(static_cast<double>(roundings));
    switch (t) {
        case DType::F16: return lambda_sqrt_r * std::ldexp(1.0, -11) * max_abs_logit;
        case DType::BF16: return lambda_sqrt_r * std::ldexp(1.0, -8) * max_abs_logit;
        default: return 1e-4;
    }
}

inline double max_abs(const std::vector<float>& v) {
    double m = 0.0;
    for (float x : v) m = std::max(m, static_cast<double>(std::abs(x)));
    return m;
}

inline int argmax(const float* row, std::int64_t n) {
    return static_cast<int>(std::max_element(row, row + n) - row);
}

// The largest minus the second largest of row[0, n): a tie within rounding when <= 2 tol.
inline double top2_margin(const float* row, std::int64_t n) {
    float a = -INFINITY, b = -INFINITY;
    for (std::int64_t i = 0; i < n; ++i) {
        if (row[i] > a) b = a, a = row[i];
        else if (row[i] > b) b = row[i];
    }
    return static_cast<double>(a) - b;
}

}  // namespace gpt::test
