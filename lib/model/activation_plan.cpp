#include "model/activation_plan.hpp"

#include <algorithm>

#include "core/errors.hpp"

namespace gpt::model {

namespace {
constexpr std::size_t kAlignBytes = 256;  // cache-line and GPU-transaction friendly
}

std::size_t ActivationPlan::take(std::size_t bytes) {
    std::size_t at = total_;
    total_ += (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
    return at;
}

ActivationPlan::ActivationPlan(const ModelDims& d, const ChunkSpec& chunk, const ModelOptions& opt,
                               int micro_batch, std::size_t attention_saved_bytes, int num_slots,
                               const ArenaPlacement* placement) {
    if (placement) num_slots = placement->slots;
    GPT_ASSERT(micro_batch > 0 && num_slots > 0, "micro_batch ", micro_batch, " slots ", num_slots);
    const std::size_t T = static_cast<std::size_t>(d.seq) * micro_batch;
    const bool sp = sequence_parallel_active(opt, d);
    GPT_ASSERT(!sp || d.seq % d.tp_size == 0, "seq ", d.seq, " not divisible by TP ", d.tp_size);
    const std::size_t R = sp ? T / static_cast<std::size_t>(d.tp_size) : T;
    tokens_ = static_cast<std::int64_t>(T);
    rows_ = static_cast<std::int64_t>(R);
    const std::size_t e = dtype_size(opt.dtype), f = 4;
    const std::size_t h = static_cast<std::size_t>(d.hidden);
    groups_ = recompute_groups(opt, chunk.num_layers);
    attention_recomputed_ = opt.recompute == ModelOptions::Recompute::Selective;

    auto layer_buffers = [&](LayerSaved& ls, bool attn, bool x_out) {
        ls.ln1_mean = take(R * f);
        ls.ln1_rstd = take(R * f);
        ls.ln1_out = take(R * h * e);
        ls.qkv = take(T * static_cast<std::size_t>(d.local_qkv_proj()) * e);  // grouped, K/V once per group
        if (d.qk_layernorm) {
            ls.qkv_pre = take(T * static_cast<std::size_t>(d.local_qkv_proj()) * e);
            const std::size_t qk_rows = T * static_cast<std::size_t>(d.local_heads() + d.local_groups());
            ls.qk_mean = take(qk_rows * f);
            ls.qk_rstd = take(qk_rows * f);
        }
        if (attn) ls.attn = take(attention_saved_bytes);
        ls.ctx = take(T * static_cast<std::size_t>(d.local_hidden()) * e);
        ls.x_mid = take(R * h * e);
        ls.ln2_mean = take(R * f);
        ls.ln2_rstd = take(R * f);
        ls.ln2_out = take(R * h * e);
        ls.fc1_pre = take(T * static_cast<std::size_t>(d.local_fc1()) * e);
        ls.gelu_out = take(T * static_cast<std::size_t>(d.local_ffn()) * e);
        if (x_out) ls.x_out = take(R * h * e);
    };

    // Workspace first: the slots' recomputed layers point into it.
    if (placement) total_ = placement->workspace_at;
    const std::size_t ws_start = total_;
    ws_.grad = take(R * h * e);
    ws_.tmp1 = take(T * h * e);
    ws_.tmp2 = take(T * h * e);
    ws_.wide = take(T * static_cast<std::size_t>(std::max(d.local_qkv_proj(), d.local_fc1())) * e);
    if (sp) ws_.gathered = take(T * h * e);
    if (chunk.post_process) {
        ws_.logits = take(T * static_cast<std::size_t>(d.local_vocab()) * e);
        ws_.row_max = take(T * f);
        ws_.sum_exp = take(T * f);
        ws_.target_logit = take(T * f);
        ws_.loss = take(T * f);
        ws_.dloss = take(T * f);
    }
    const std::size_t shared_attn = attention_recomputed_ ? take(attention_saved_bytes) : 0;
    // One recomputed group's buffers; the last layer's output is never here (it is per slot).
    const int set_layers = recompute_set_layers(groups_);
    std::vector<LayerSaved> shared(static_cast<std::size_t>(set_layers));
    for (int j = 0; j < set_layers; ++j)
        layer_buffers(shared[static_cast<std::size_t>(j)], true, j + 1 < set_layers);
    workspace_bytes_ = total_ - ws_start;

    for (int s = 0; s < num_slots; ++s) {
        if (placement) total_ = placement->slots_at + static_cast<std::size_t>(s) * placement->slot_stride;
        const std::size_t start = total_;
        SlotSaved sl{};
        sl.input = take(R * h * e);
        if (chunk.pre_process) sl.tokens = take(T * 4);
        if (chunk.post_process) sl.targets = take(T * 4);
        if (opt.reset_position_ids) sl.positions = take(T * 4);
        if (opt.reset_attention_mask) sl.doc_start = take(T * 4);
        sl.layers.resize(static_cast<std::size_t>(chunk.num_layers));
        for (const LayerGroup& g : groups_)
            for (int j = 0; j < g.count; ++j) {
                LayerSaved& ls = sl.layers[static_cast<std::size_t>(g.first + j)];
                if (!g.recompute) {
                    layer_buffers(ls, !attention_recomputed_, true);
                    if (attention_recomputed_) ls.attn = shared_attn;
                    continue;
                }
                ls = shared[static_cast<std::size_t>(j)];
                if (j + 1 == g.count) ls.x_out = take(R * h * e);  // the next group's input
            }
        if (chunk.post_process) {
            sl.lnf_mean = take(R * f);
            sl.lnf_rstd = take(R * f);
            sl.lnf_out = take(R * h * e);
        }
        per_slot_ = total_ - start;
        GPT_ASSERT(!placement || per_slot_ <= placement->slot_stride, "slot of ", per_slot_,
                   " bytes does not fit the shared arena's stride ", placement->slot_stride);
        slots_.push_back(std::move(sl));
    }
    if (placement) total_ = 0;  // the shared arena's owner knows its size
}

}  // namespace gpt::model
