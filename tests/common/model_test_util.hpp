// Shared pieces of the model tests (their tiny configuration: tiny.hpp): a 1-rank TP group, random
// batches, and a plain fp64 reference forward pass of the whole GPT.
#pragma once

#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "dist/comm_mpi.hpp"
#include "model/gpt_model.hpp"
#include "tiny.hpp"

namespace gpt::test {

inline std::unique_ptr<dist::Communicator> self_comm(const char* name = "tp") {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_SELF, &c);
    return std::make_unique<dist::MpiCommunicator>(c, name);
}

inline std::vector<std::int32_t> random_tokens(int b, int s, int vocab, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> u(0, vocab - 1);
    std::vector<std::int32_t> t(static_cast<std::size_t>(b) * (s + 1));
    for (auto& x : t) x = u(rng);
    return t;
}

// This rank's slice of every parameter of `part`, taken from the 1-rank buffer `src` laid
// out as `full` (same names; split entries sliced along their split dim, of any rank: a
// SwiGLU fc1 is [2, ffn, h] split along dim 1).
inline std::vector<float> take_slices(const model::ParamLayout& full, const std::vector<float>& src,
                                      const model::ParamLayout& part) {
    std::vector<float> out(static_cast<std::size_t>(part.total_elements()), 0.0f);
    for (const auto& e : part.entries()) {
        const model::ParamEntry& g = full.at(e.name);
        // [outer, split, inner] around the split dim (a replicated entry: one block).
        const std::size_t dim = e.split_dim < 0 ? 0 : static_cast<std::size_t>(e.split_dim);
        std::int64_t inner = 1;
        for (std::size_t k = dim + 1; k < e.local_shape.size(); ++k) inner *= e.local_shape[k];
        const std::int64_t local = e.split_dim < 0 ? e.numel : e.local_shape[dim] * inner;
        const std::int64_t global = e.split_dim < 0 ? g.numel : g.local_shape[dim] * inner;
        const std::int64_t first = e.split_dim < 0 ? 0 : e.slice_start * inner;
        for (std::int64_t i = 0; i < e.numel; ++i)
            out[static_cast<std::size_t>(e.offset + i)] =
                src[static_cast<std::size_t>(g.offset + (i / local) * global + first + i % local)];
    }
    return out;
}

// Plain fp64 GPT forward (no dropout) over the flat fp32 parameters of a one-chunk model:
// returns the mean token loss of tokens (b, s+1).
inline double reference_loss(const model::GptModel& m, const std::vector<float>& p,
                             const std::vector<std::int32_t>& tokens, bool tanh_gelu = false) {
    const auto& d = m.dims();
    const auto& L = m.layout();
    const int b = m.micro_batch(), S = d.seq, H = d.hidden, NP = d.heads, HN = d.head_dim,
              F = d.ffn;
    const std::int64_t V = d.vocab_padded;
    const double eps = m.options().layernorm_eps;
    auto P = [&](const std::string& n) { return p.data() + L.at(n).offset; };
    auto ln = [&](const std::vector<double>& x, const float* g, const float* bb) {
        std::vector<double> y(x.size());
        for (int t = 0; t < S; ++t) {
            double mu = 0, var = 0;
            for (int i = 0; i < H; ++i) mu += x[t * H + i];
            mu /= H;
            for (int i = 0; i < H; ++i) var += (x[t * H + i] - mu) * (x[t * H + i] - mu);
            var /= H;
            for (int i = 0; i < H; ++i)
                y[t * H + i] = (x[t * H + i] - mu) / std::sqrt(var + eps) * g[i] + bb[i];
        }
        return y;
    };
    auto lin = [&](const std::vector<double>& x, int in, int out, const float* w,
                   const float* bias) {
        std::vector<double> y(static_cast<std::size_t>(S) * out);
        for (int t = 0; t < S; ++t)
            for (int o = 0; o < out; ++o) {
                double acc = bias ? bias[o] : 0.0;
                for (int i = 0; i < in; ++i) acc += x[t * in + i] * w[o * in + i];
                y[t * out + o] = acc;
            }
        return y;
    };
    double total = 0;
    for (int bi = 0; bi < b; ++bi) {
        const std::int32_t* tok = tokens.data() + bi * (S + 1);
        std::vector<double> x(static_cast<std::size_t>(S) * H);
        const float* wte = P(model::ParamLayout::word_embeddings());
        const float* wpe = P(model::ParamLayout::position_embeddings());
        for (int t = 0; t < S; ++t)
            for (int i = 0; i < H; ++i) x[t * H + i] = wte[tok[t] * H + i] + wpe[t * H + i];
        for (int l = 0; l < d.num_layers; ++l) {
            const std::string pre = model::ParamLayout::layer_prefix(l);
            auto a = ln(x, P(pre + "input_layernorm/weight"), P(pre + "input_layernorm/bias"));
            auto qkv = lin(a, H, 3 * H, P(pre + "self_attention/query_key_value/weight"),
                           P(pre + "self_attention/query_key_value/bias"));
            std::vector<double> ctx(static_cast<std::size_t>(S) * H, 0.0);
            for (int n = 0; n < NP; ++n)
                for (int i = 0; i < S; ++i) {
                    std::vector<double> sc(i + 1);
                    double mx = -1e300;
                    for (int j = 0; j <= i; ++j) {
                        double dot = 0;
                        for (int e = 0; e < HN; ++e)
                            dot += qkv[i * 3 * H + n * 3 * HN + e] * qkv[j * 3 * H + n * 3 * HN + HN + e];
                        sc[j] = dot / std::sqrt(static_cast<double>(HN));
                        mx = std::max(mx, sc[j]);
                    }
                    double z = 0;
                    for (int j = 0; j <= i; ++j) z += (sc[j] = std::exp(sc[j] - mx));
                    for (int j = 0; j <= i; ++j)
                        for (int e = 0; e < HN; ++e)
                            ctx[i * H + n * HN + e] += sc[j] / z * qkv[j * 3 * H + n * 3 * HN + 2 * HN + e];
                }
            auto o = lin(ctx, H, H, P(pre + "self_attention/dense/weight"),
                         P(pre + "self_attention/dense/bias"));
            for (std::size_t i = 0; i < x.size(); ++i) x[i] += o[i];
            auto a2 = ln(x, P(pre + "post_attention_layernorm/weight"),
                         P(pre + "post_attention_layernorm/bias"));
            auto f1 = lin(a2, H, F, P(pre + "mlp/dense_h_to_4h/weight"), P(pre + "mlp/dense_h_to_4h/bias"));
            for (auto& v : f1)
                v = tanh_gelu ? 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))
                              : 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
            auto f2 = lin(f1, F, H, P(pre + "mlp/dense_4h_to_h/weight"), P(pre + "mlp/dense_4h_to_h/bias"));
            for (std::size_t i = 0; i < x.size(); ++i) x[i] += f2[i];
        }
        auto y = ln(x, P(model::ParamLayout::final_ln_weight()), P(model::ParamLayout::final_ln_bias()));
        for (int t = 0; t < S; ++t) {
            std::vector<double> logit(static_cast<std::size_t>(V));
            double mx = -1e300;
            for (std::int64_t v = 0; v < V; ++v) {
                double acc = 0;
                for (int i = 0; i < H; ++i) acc += y[t * H + i] * wte[v * H + i];
                logit[static_cast<std::size_t>(v)] = acc;
                mx = std::max(mx, acc);
            }
            double z = 0;
            for (double lv : logit) z += std::exp(lv - mx);
            total += std::log(z) + mx - logit[static_cast<std::size_t>(tok[t + 1])];
        }
    }
    return total / (static_cast<double>(b) * S);
}

}  // namespace gpt::test
