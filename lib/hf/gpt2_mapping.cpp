#include "hf/gpt2_mapping.hpp"

#include <cstring>
#include <set>
#include <string>

#include "core/errors.hpp"
#include "hf/hf_tensors.hpp"

namespace gpt::hf {

namespace {

enum class Kind { Copy, Transpose, QkvWeight, QkvBias, Vocab };

// One tensor of both models: the HF name (without "transformer."), the Megatron name, the
// HF shape, and how elements correspond.
struct Pair {
    std::string hf, megatron;
    std::vector<std::int64_t> hf_shape;
    Kind kind;
};

std::vector<Pair> pairs(const model::ModelDims& d, std::int64_t vocab) {
    using L = model::ParamLayout;
    const std::int64_t h = d.hidden, f = d.ffn;
    std::vector<Pair> v;
    v.push_back({"wte.weight", L::word_embeddings(), {vocab, h}, Kind::Vocab});
    v.push_back({"wpe.weight", L::position_embeddings(), {d.max_positions, h}, Kind::Copy});
    for (int l = 0; l < d.num_layers; ++l) {
        const std::string hp = "h." + std::to_string(l) + ".", mp = L::layer_prefix(l);
        v.push_back({hp + "ln_1.weight", mp + "input_layernorm/weight", {h}, Kind::Copy});
        v.push_back({hp + "ln_1.bias", mp + "input_layernorm/bias", {h}, Kind::Copy});
        v.push_back({hp + "attn.c_attn.weight", mp + "self_attention/query_key_value/weight", {h, 3 * h}, Kind::QkvWeight});
        v.push_back({hp + "attn.c_attn.bias", mp + "self_attention/query_key_value/bias", {3 * h}, Kind::QkvBias});
        v.push_back({hp + "attn.c_proj.weight", mp + "self_attention/dense/weight", {h, h}, Kind::Transpose});
        v.push_back({hp + "attn.c_proj.bias", mp + "self_attention/dense/bias", {h}, Kind::Copy});
        v.push_back({hp + "ln_2.weight", mp + "post_attention_layernorm/weight", {h}, Kind::Copy});
        v.push_back({hp + "ln_2.bias", mp + "post_attention_layernorm/bias", {h}, Kind::Copy});
        v.push_back({hp + "mlp.c_fc.weight", mp + "mlp/dense_h_to_4h/weight", {h, f}, Kind::Transpose});
        v.push_back({hp + "mlp.c_fc.bias", mp + "mlp/dense_h_to_4h/bias", {f}, Kind::Copy});
        v.push_back({hp + "mlp.c_proj.weight", mp + "mlp/dense_4h_to_h/weight", {f, h}, Kind::Transpose});
        v.push_back({hp + "mlp.c_proj.bias", mp + "mlp/dense_4h_to_h/bias", {h}, Kind::Copy});
    }
    v.push_back({"ln_f.weight", L::final_ln_weight(), {h}, Kind::Copy});
    v.push_back({"ln_f.bias", L::final_ln_bias(), {h}, Kind::Copy});
    return v;
}

// Calls fn(hf_index, megatron_index) for every element of the HF tensor.
template <typename Fn>
void for_each_element(const Pair& p, const model::ModelDims& d, Fn&& fn) {
    const std::int64_t h = d.hidden, hd = d.head_dim;
    // Megatron's qkv row (head, j, e) is HF's c_attn column j * h + head * hd + e.
    auto qkv_col = [&](std::int64_t r) {
        const std::int64_t head = r / (3 * hd), j = (r / hd) % 3, e = r % hd;
        return j * h + head * hd + e;
    };
    switch (p.kind) {
        case Kind::Copy:
        case Kind::Vocab: {
            std::int64_t n = 1;
            for (auto s : p.hf_shape) n *= s;
            for (std::int64_t i = 0; i < n; ++i) fn(i, i);
            return;
        }
        case Kind::Transpose: {
            // HF [in, out] = Megatron [out, in] transposed.
            const std::int64_t in = p.hf_shape[0], out = p.hf_shape[1];
            for (std::int64_t r = 0; r < out; ++r)
                for (std::int64_t c = 0; c < in; ++c) fn(c * out + r, r * in + c);
            return;
        }
        case Kind::QkvWeight:
            for (std::int64_t r = 0; r < 3 * h; ++r)
                for (std::int64_t c = 0; c < h; ++c) fn(c * 3 * h + qkv_col(r), r * h + c);
            return;
        case Kind::QkvBias:
            for (std::int64_t r = 0; r < 3 * h; ++r) fn(qkv_col(r), r);
            return;
    }
}


}  // namespace

std::vector<NamedTensor> megatron_to_hf(const model::ModelDims& d, const model::ParamLayout& layout,
                                        const float* flat, std::int64_t vocab) {
    GPT_REQUIRE(vocab > 0 && vocab <= d.vocab_padded, InternalError, "vocabulary ", vocab, " outside the padded ",
                d.vocab_padded);
    std::vector<NamedTensor> out;
    for (const Pair& p : pairs(d, vocab)) {
        const float* src = flat + layout.at(p.megatron).offset;
        NamedTensor t{"transformer." + p.hf, p.hf_shape, std::vector<float>(static_cast<std::size_t>(element_count(p.hf_shape)))};
        for_each_element(p, d, [&](std::int64_t hi, std::int64_t mi) { t.values[static_cast<std::size_t>(hi)] = src[mi]; });
        out.push_back(std::move(t));
    }
    return out;
}

void hf_to_megatron(const SafetensorsFile& f, const model::ModelDims& d, const model::ParamLayout& layout,
                    std::int64_t vocab, float* flat) {
    // GPT2LMHeadModel saves "transformer.h.0...", GPT2Model (the hub's gpt2) "h.0...".
    const bool prefixed = f.has("transformer.wte.weight");
    const std::string prefix = prefixed ? "transformer." : "";
    std::set<std::string> used;
    for (const Pair& p : pairs(d, vocab)) {
        const std::string name = prefix + p.hf;
        GPT_REQUIRE(f.has(name), DataError, f.path(), ": no tensor named ", name, " (a GPT-2 of ", d.num_layers,
                    " layers needs it)");
        const std::vector<float> v = read_with_shape(f, name, p.hf_shape);
        float* dst = flat + layout.at(p.megatron).offset;
        for_each_element(p, d, [&](std::int64_t hi, std::int64_t mi) { dst[mi] = v[static_cast<std::size_t>(hi)]; });
        if (p.kind == Kind::Vocab)  // padding rows: copies of the last real row
            fill_padding_rows(dst, vocab, d.vocab_padded, d.hidden);
        used.insert(name);
    }
    for (const auto& [name, e] : f.header().tensors) {
        if (used.count(name)) continue;
        const bool mask_buffer = name.size() > 9 && (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias"));
        if (mask_buffer) continue;  // the causal mask, a buffer in older transformers versions
        if (name == "lm_head.weight") {
            GPT_REQUIRE(f.read(name) == f.read(prefix + "wte.weight"), UsageError, f.path(),
                        ": lm_head.weight differs from wte.weight: untied output embeddings cannot be "
                        "expressed by this model (it ties them, as GPT-2 does)");
            continue;
        }
        GPT_THROW(DataError, f.path(), ": tensor ", name, " is not part of GPT-2 as this model builds it; refusing to drop it");
    }
}

}  // namespace gpt::hf
