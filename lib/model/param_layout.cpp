#include "model/param_layout.hpp"

#include <algorithm>

#include "core/errors.hpp"

namespace gpt::model {

std::string ParamLayout::layer_prefix(int layer) {
    return "language_model/encoder/layers." + std::to_string(layer) + "/";
}

ParamLayout::ParamLayout(const ModelDims& d, const ChunkSpec& chunk) {
    GPT_REQUIRE(chunk.num_layers >= 0 && chunk.first_layer >= 0 &&
                    chunk.first_layer + chunk.num_layers <= d.num_layers,
                InternalError, "model chunk layers [", chunk.first_layer, ", ",
                chunk.first_layer + chunk.num_layers, ") outside 0..", d.num_layers);
    const std::int64_t h = d.hidden, V = d.vocab_padded;
    if (chunk.pre_process) {
        add(word_embeddings(), {V, h}, 0, ParamInit::Normal, -1, d);
        add(position_embeddings(), {d.max_positions, h}, -1, ParamInit::Normal, -1, d);
    }
    for (int l = chunk.first_layer; l < chunk.first_layer + chunk.num_layers; ++l) {
        const std::string p = layer_prefix(l);
        add(p + "input_layernorm/weight", {h}, -1, ParamInit::One, l, d);
        add(p + "input_layernorm/bias", {h}, -1, ParamInit::Zero, l, d);
        // Column parallel: output rows split. Megatron orders the fused QKV rows as
        // [heads, 3, head_dim], so a contiguous row range is whole heads.
        add(p + "self_attention/query_key_value/weight", {3 * h, h}, 0, ParamInit::Normal, l, d);
        add(p + "self_attention/query_key_value/bias", {3 * h}, 0, ParamInit::Zero, l, d);
        // Row parallel: input columns split, bias added once after the reduction.
        add(p + "self_attention/dense/weight", {h, h}, 1, ParamInit::ScaledNormal, l, d);
        add(p + "self_attention/dense/bias", {h}, -1, ParamInit::Zero, l, d);
        add(p + "post_attention_layernorm/weight", {h}, -1, ParamInit::One, l, d);
        add(p + "post_attention_layernorm/bias", {h}, -1, ParamInit::Zero, l, d);
        add(p + "mlp/dense_h_to_4h/weight", {d.ffn, h}, 0, ParamInit::Normal, l, d);
        add(p + "mlp/dense_h_to_4h/bias", {d.ffn}, 0, ParamInit::Zero, l, d);
        add(p + "mlp/dense_4h_to_h/weight", {h, d.ffn}, 1, ParamInit::ScaledNormal, l, d);
        add(p + "mlp/dense_4h_to_h/bias", {h}, -1, ParamInit::Zero, l, d);
    }
    if (chunk.post_process) {
        add(final_ln_weight(), {h}, -1, ParamInit::One, -1, d);
        add(final_ln_bias(), {h}, -1, ParamInit::Zero, -1, d);
        // The head is tied to the word embeddings; a stage without them keeps its own copy,
        // initialised identically and kept equal by reducing its grad over the embedding group.
        if (!chunk.pre_process)
            add(word_embeddings_for_head(), {V, h}, 0, ParamInit::Normal, -1, d);
    }
}

void ParamLayout::add(std::string name, std::vector<std::int64_t> global_shape, int split_dim,
                      ParamInit init, int layer, const ModelDims& d) {
    ParamEntry e;
    e.name = std::move(name);
    e.global_shape = global_shape;
    e.local_shape = global_shape;
    e.split_dim = split_dim;
    if (split_dim >= 0) {
        const std::int64_t full = global_shape[split_dim];
        GPT_ASSERT(full % d.tp_size == 0, e.name, " dim ", split_dim, " = ", full,
                   " not divisible by TP ", d.tp_size);
        e.local_shape[split_dim] = full / d.tp_size;
        e.slice_start = e.local_shape[split_dim] * d.tp_rank;
    }
    e.numel = 1;
    for (auto n : e.local_shape) e.numel *= n;
    e.init = init;
    e.weight_decay = global_shape.size() > 1;
    e.tp_duplicate = split_dim < 0 && d.tp_size > 1;
    e.layer = layer;
    e.offset = total_;
    total_ += (e.numel + kAlign - 1) / kAlign * kAlign;
    entries_.push_back(std::move(e));
}

const ParamEntry* ParamLayout::find(const std::string& name) const {
    for (const auto& e : entries_)
        if (e.name == name) return &e;
    return nullptr;
}

const ParamEntry& ParamLayout::at(const std::string& name) const {
    const ParamEntry* e = find(name);
    GPT_ASSERT(e != nullptr, "no parameter named ", name, " in this model chunk");
    return *e;
}

std::size_t ParamLayout::entry_index(std::int64_t offset) const {
    GPT_ASSERT(offset >= 0 && offset < total_, "offset ", offset, " outside the layout");
    auto it = std::upper_bound(entries_.begin(), entries_.end(), offset,
                               [](std::int64_t o, const ParamEntry& e) { return o < e.offset; });
    return static_cast<std::size_t>(it - entries_.begin()) - 1;
}

LayerParamOffsets layer_offsets(const ParamLayout& layout, int layer) {
    const std::string p = ParamLayout::layer_prefix(layer);
    auto o = [&](const char* n) { return layout.at(p + n).offset; };
    return LayerParamOffsets{o("input_layernorm/weight"),
                             o("input_layernorm/bias"),
                             o("self_attention/query_key_value/weight"),
                             o("self_attention/query_key_value/bias"),
                             o("self_attention/dense/weight"),
                             o("self_attention/dense/bias"),
                             o("post_attention_layernorm/weight"),
                             o("post_attention_layernorm/bias"),
                             o("mlp/dense_h_to_4h/weight"),
                             o("mlp/dense_h_to_4h/bias"),
                             o("mlp/dense_4h_to_h/weight"),
                             o("mlp/dense_4h_to_h/bias")};
}

}  // namespace gpt::model
