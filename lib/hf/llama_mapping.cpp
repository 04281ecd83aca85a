#include "hf/llama_mapping.hpp"

#include <cstring>
#include <functional>
#include <set>
#include <string>

#include "core/errors.hpp"
#include "hf/hf_tensors.hpp"

namespace gpt::hf {

namespace {

// One HF tensor: its name (after "model." for the decoder), the Megatron tensor it lives in,
// its HF shape, and the Megatron element of each HF element.
struct Piece {
    std::string hf, megatron;
    std::vector<std::int64_t> hf_shape;
    std::function<std::int64_t(std::int64_t)> megatron_index;
    bool vocab = false;  // padded rows to fill on import
};


std::vector<Piece> pieces(const model::ModelDims& d, std::int64_t vocab) {
    using L = model::ParamLayout;
    const std::int64_t h = d.hidden, f = d.ffn, hd = d.head_dim, ng = d.groups(), qpg = d.heads / d.groups();
    const bool perm = d.rotary_interleaved;
    // HF row e of a rotated head -> our row within the head.
    auto ours = [hd, perm](std::int64_t e) { return !perm ? e : e < hd / 2 ? 2 * e : 2 * (e - hd / 2) + 1; };
    auto same = [](std::int64_t i) { return i; };
    std::vector<Piece> v;
    v.push_back({"model.embed_tokens.weight", L::word_embeddings(), {vocab, h}, same, true});
    for (int l = 0; l < d.num_layers; ++l) {
        const std::string hp = "model.layers." + std::to_string(l) + ".", mp = L::layer_prefix(l);
        const std::string qkv = mp + "self_attention/query_key_value/weight";
        v.push_back({hp + "input_layernorm.weight", mp + "input_layernorm/weight", {h}, same});
        // slot j of group g: Megatron row (g (qpg + 2) + j) hd + e.
        v.push_back({hp + "self_attn.q_proj.weight", qkv, {d.heads * hd, h}, [=](std::int64_t i) {
                         const std::int64_t r = i / h, c = i % h, head = r / hd, e = r % hd;
                         return (((head / qpg) * (qpg + 2) + head % qpg) * hd + ours(e)) * h + c;
                     }});
        v.push_back({hp + "self_attn.k_proj.weight", qkv, {ng * hd, h}, [=](std::int64_t i) {
                         const std::int64_t r = i / h, c = i % h, g = r / hd, e = r % hd;
                         return ((g * (qpg + 2) + qpg) * hd + ours(e)) * h + c;
                     }});
        v.push_back({hp + "self_attn.v_proj.weight", qkv, {ng * hd, h}, [=](std::int64_t i) {
                         const std::int64_t r = i / h, c = i % h, g = r / hd, e = r % hd;
                         return ((g * (qpg + 2) + qpg + 1) * hd + e) * h + c;
                     }});
        v.push_back({hp + "self_attn.o_proj.weight", mp + "self_attention/dense/weight", {h, h}, same});
        v.push_back({hp + "post_attention_layernorm.weight", mp + "post_attention_layernorm/weight", {h}, same});
        const std::string fc1 = mp + "mlp/dense_h_to_4h/weight";
        v.push_back({hp + "mlp.gate_proj.weight", fc1, {f, h}, same});
        v.push_back({hp + "mlp.up_proj.weight", fc1, {f, h}, [=](std::int64_t i) { return f * h + i; }});
        v.push_back({hp + "mlp.down_proj.weight", mp + "mlp/dense_4h_to_h/weight", {h, f}, same});
    }
    v.push_back({"model.norm.weight", L::final_ln_weight(), {h}, same});
    if (d.untied_output) v.push_back({"lm_head.weight", L::output_layer(), {vocab, h}, same, true});
    return v;
}

void require_llama(const model::ModelDims& d) {
    GPT_REQUIRE(d.rope && d.rmsnorm && d.swiglu && !d.linear_bias && d.rotary_dim == d.head_dim, InternalError,
                "the Llama mapping got a model that is not Llama-style");
}

}  // namespace

std::vector<NamedTensor> megatron_to_llama(const model::ModelDims& d, const model::ParamLayout& layout,
                                           const float* flat, std::int64_t vocab) {
    require_llama(d);
    GPT_REQUIRE(vocab > 0 && vocab <= d.vocab_padded, InternalError, "vocabulary ", vocab, " outside the padded ",
                d.vocab_padded);
    std::vector<NamedTensor> out;
    for (const Piece& p : pieces(d, vocab)) {
        const float* src = flat + layout.at(p.megatron).offset;
        NamedTensor t{p.hf, p.hf_shape, std::vector<float>(static_cast<std::size_t>(element_count(p.hf_shape)))};
        for (std::int64_t i = 0; i < element_count(p.hf_shape); ++i) t.values[static_cast<std::size_t>(i)] = src[p.megatron_index(i)];
        out.push_back(std::move(t));
    }
    return out;
}

void llama_to_megatron(const SafetensorsFile& f, const model::ModelDims& d, const model::ParamLayout& layout,
                       std::int64_t vocab, float* flat) {
    require_llama(d);
    // LlamaForCausalLM saves "model.layers.0...", LlamaModel "layers.0...".
    const bool prefixed = f.has("model.embed_tokens.weight");
    auto stored = [&](const std::string& n) { return prefixed || !n.starts_with("model.") ? n : n.substr(6); };
    std::set<std::string> used;
    for (const Piece& p : pieces(d, vocab)) {
        const std::string name = stored(p.hf);
        GPT_REQUIRE(f.has(name), DataError, f.path(), ": no tensor named ", name, " (this Llama of ", d.num_layers,
                    " layers", d.untied_output ? ", untied," : "", " needs it)");
        const std::vector<float> v = read_with_shape(f, name, p.hf_shape);
        float* dst = flat + layout.at(p.megatron).offset;
        for (std::int64_t i = 0; i < element_count(p.hf_shape); ++i) dst[p.megatron_index(i)] = v[static_cast<std::size_t>(i)];
        if (p.vocab)  // padding rows: copies of the last real row
            fill_padding_rows(dst, vocab, d.vocab_padded, d.hidden);
        used.insert(name);
    }
    for (const auto& [name, e] : f.header().tensors) {
        if (used.count(name)) continue;
        if (name.ends_with(".rotary_emb.inv_freq")) continue;  // a buffer older transformers saved
        if (name == "lm_head.weight" && !d.untied_output) {
            GPT_REQUIRE(f.read(name) == f.read(stored("model.embed_tokens.weight")), UsageError, f.path(),
                        ": lm_head.weight differs from embed_tokens.weight although config.json ties them");
            continue;
        }
        GPT_THROW(DataError, f.path(), ": tensor ", name, " is not part of Llama as this model builds it; refusing to drop it");
    }
}

}  // namespace gpt::hf
