#include "model/param_layout.hpp"

#include <algorithm>

#include "config/param_count.hpp"
#include "core/errors.hpp"

namespace gpt::model {

namespace {

// The dimensions the one parameter count (config/param_count.hpp) reads.
ParamDims count_dims(const ModelDims& d) {
    ParamDims p;
    p.hidden = d.hidden;
    p.heads = d.heads;
    p.head_dim = d.head_dim;
    p.ffn = d.ffn;
    p.query_groups = d.query_groups;
    p.max_positions = d.max_positions;
    p.vocab_padded = d.vocab_padded;
    p.swiglu = d.swiglu;
    p.linear_bias = d.linear_bias;
    p.rmsnorm = d.rmsnorm;
    p.position_table = !d.rope;
    p.untied_output = d.untied_output;
    p.qk_layernorm = d.qk_layernorm;
    return p;
}

}  // namespace

std::string ParamLayout::layer_prefix(int layer) {
    return "language_model/encoder/layers." + std::to_string(layer) + "/";
}

ParamLayout::ParamLayout(const ModelDims& d, const ChunkSpec& chunk) {
    GPT_REQUIRE(chunk.num_layers >= 0 && chunk.first_layer >= 0 &&
                    chunk.first_layer + chunk.num_layers <= d.num_layers,
                InternalError, "model chunk layers [", chunk.first_layer, ", ",
                chunk.first_layer + chunk.num_layers, ") outside 0..", d.num_layers);
    const std::int64_t h = d.hidden, V = d.vocab_padded;
    const bool bias = d.linear_bias;
    if (chunk.pre_process) {
        add(word_embeddings(), {V, h}, 0, ParamInit::Normal, -1, d);
        if (!d.rope)  // rotary embeddings replace the learned position table
            add(position_embeddings(), {d.max_positions, h}, -1, ParamInit::Normal, -1, d);
    }
    // Megatron keeps the layernorm names for RMSNorm, which has no bias. Under
    // --apply-layernorm-1p a norm scales by 1 + weight, so its weight starts at 0 (Megatron).
    const ParamInit norm_weight = d.layernorm_1p ? ParamInit::Zero : ParamInit::One;
    // tp_partial_grad: see ParamEntry.
    auto norm = [&](const std::string& name, int layer, std::int64_t width, bool tp_partial_grad = false) {
        add(name + "/weight", {width}, -1, norm_weight, layer, d);
        entries_.back().tp_partial_grad = tp_partial_grad && d.tp_size > 1;
        if (d.rmsnorm) return;
        add(name + "/bias", {width}, -1, ParamInit::Zero, layer, d);
        entries_.back().tp_partial_grad = tp_partial_grad && d.tp_size > 1;
    };
    const ParamDims counted = count_dims(d);
    const std::int64_t qkv_rows = gpt::qkv_rows(counted);
    for (int l = chunk.first_layer; l < chunk.first_layer + chunk.num_layers; ++l) {
        const std::string p = layer_prefix(l);
        norm(p + "input_layernorm", l, h);
        // Column parallel: output rows split. Megatron orders the fused QKV rows by query
        // group, [ng, np/ng + 2, hn] (np/ng queries, the key, the value; ng = np without
        // grouped-query attention, which is [np, 3, hn]), so a contiguous row range is
        // whole groups.
        add(p + "self_attention/query_key_value/weight", {qkv_rows, h}, 0, ParamInit::Normal, l, d);
        if (bias) add(p + "self_attention/query_key_value/bias", {qkv_rows}, 0, ParamInit::Zero, l, d);
        if (d.qk_layernorm) {
            // Megatron's q_layernorm and k_layernorm: over hn, shared by every head, so
            // replicated over TP while each rank's heads give a part of their gradients
            // (GptModel sums them over TP).
            norm(p + "self_attention/q_layernorm", l, d.head_dim, true);
            norm(p + "self_attention/k_layernorm", l, d.head_dim, true);
        }
        // Row parallel: input columns split, bias added once after the reduction.
        add(p + "self_attention/dense/weight", {h, h}, 1, ParamInit::ScaledNormal, l, d);
        if (bias) add(p + "self_attention/dense/bias", {h}, -1, ParamInit::Zero, l, d);
        norm(p + "post_attention_layernorm", l, h);
        if (d.swiglu) {
            // [gate; up] (Megatron's linear_fc1 as a [2 ffn, h] tensor viewed as [2, ffn, h]):
            // each TP rank holds its rows of both halves, so its local fc1 output is
            // [gate_r, up_r] whatever the TP size, and checkpoints reshard by slicing dim 1.
            add(p + "mlp/dense_h_to_4h/weight", {2, d.ffn, h}, 1, ParamInit::Normal, l, d);
            if (bias) add(p + "mlp/dense_h_to_4h/bias", {2, d.ffn}, 1, ParamInit::Zero, l, d);
        } else {
            add(p + "mlp/dense_h_to_4h/weight", {d.ffn, h}, 0, ParamInit::Normal, l, d);
            if (bias) add(p + "mlp/dense_h_to_4h/bias", {d.ffn}, 0, ParamInit::Zero, l, d);
        }
        add(p + "mlp/dense_4h_to_h/weight", {h, d.ffn}, 1, ParamInit::ScaledNormal, l, d);
        if (bias) add(p + "mlp/dense_4h_to_h/bias", {h}, -1, ParamInit::Zero, l, d);
    }
    if (chunk.post_process) {
        add(final_ln_weight(), {h}, -1, norm_weight, -1, d);
        if (!d.rmsnorm) add(final_ln_bias(), {h}, -1, ParamInit::Zero, -1, d);
        if (d.untied_output) {
            // Megatron's --untie-embeddings-and-output-weights: the head's own weight.
            add(output_layer(), {V, h}, 0, ParamInit::Normal, -1, d);
        } else if (!chunk.pre_process) {
            // The head is tied to the word embeddings; a stage without them keeps its own
            // copy, initialised identically and kept equal by reducing its grad over the
            // embedding group.
            add(word_embeddings_for_head(), {V, h}, 0, ParamInit::Normal, -1, d);
        }
    }
    // The table must hold what the planner counted (its memory model and this run's
    // buffers read the same count): a tensor added here without the count is caught at once.
    std::int64_t held = 0;
    for (const auto& e : entries_) held += e.numel;
    const std::int64_t expected =
        chunk_params(counted, d.tp_size, chunk.num_layers, chunk.pre_process, chunk.post_process).total();
    GPT_ASSERT(held == expected, "parameter layout holds ", held, " elements, the parameter count says ", expected);
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
    // Matrices decay; biases (SwiGLU's fc1 bias is [2, ffn]) and norms do not.
    e.weight_decay = global_shape.size() > 1 && !e.name.ends_with("/bias");
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
    // Absent parameters (RMSNorm's bias, --disable-bias-linear): -1.
    auto opt = [&](const char* n) {
        const ParamEntry* e = layout.find(p + n);
        return e ? e->offset : std::int64_t{-1};
    };
    return LayerParamOffsets{o("input_layernorm/weight"),
                             opt("input_layernorm/bias"),
                             o("self_attention/query_key_value/weight"),
                             opt("self_attention/query_key_value/bias"),
                             o("self_attention/dense/weight"),
                             opt("self_attention/dense/bias"),
                             o("post_attention_layernorm/weight"),
                             opt("post_attention_layernorm/bias"),
                             o("mlp/dense_h_to_4h/weight"),
                             opt("mlp/dense_h_to_4h/bias"),
                             o("mlp/dense_4h_to_h/weight"),
                             opt("mlp/dense_4h_to_h/bias"),
                             opt("self_attention/q_layernorm/weight"),
                             opt("self_attention/q_layernorm/bias"),
                             opt("self_attention/k_layernorm/weight"),
                             opt("self_attention/k_layernorm/bias")};
}

bool is_qk_norm(const ParamEntry& e) {
    return e.name.find("/q_layernorm/") != std::string::npos || e.name.find("/k_layernorm/") != std::string::npos;
}

bool is_embedding_or_output(const ParamEntry& e) {
    return e.name == ParamLayout::word_embeddings() || e.name == ParamLayout::output_layer() ||
           e.name == ParamLayout::word_embeddings_for_head();
}

}  // namespace gpt::model
