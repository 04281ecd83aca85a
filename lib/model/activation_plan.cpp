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

ActivationPlan::ActivationPlan(const ModelDims& d, const ChunkSpec& chunk, int micro_batch,
                               DType dtype, std::size_t attention_saved_bytes, int num_slots) {
    GPT_ASSERT(micro_batch > 0 && num_slots > 0, "micro_batch ", micro_batch, " slots ", num_slots);
    const std::size_t T = static_cast<std::size_t>(d.seq) * micro_batch;
    tokens_ = static_cast<std::int64_t>(T);
    const std::size_t e = dtype_size(dtype), f = 4;
    const std::size_t h = static_cast<std::size_t>(d.hidden);
    for (int s = 0; s < num_slots; ++s) {
        const std::size_t start = total_;
        SlotSaved sl{};
        sl.input = take(T * h * e);
        if (chunk.pre_process) sl.tokens = take(T * 4);
        if (chunk.post_process) sl.targets = take(T * 4);
        for (int l = 0; l < chunk.num_layers; ++l) {
            LayerSaved ls{};
            ls.ln1_mean = take(T * f);
            ls.ln1_rstd = take(T * f);
            ls.ln1_out = take(T * h * e);
            ls.qkv = take(T * static_cast<std::size_t>(d.local_qkv()) * e);
            ls.attn = take(attention_saved_bytes);
            ls.ctx = take(T * static_cast<std::size_t>(d.local_hidden()) * e);
            ls.x_mid = take(T * h * e);
            ls.ln2_mean = take(T * f);
            ls.ln2_rstd = take(T * f);
            ls.ln2_out = take(T * h * e);
            ls.fc1_pre = take(T * static_cast<std::size_t>(d.local_ffn()) * e);
            ls.gelu_out = take(T * static_cast<std::size_t>(d.local_ffn()) * e);
            ls.x_out = take(T * h * e);
            sl.layers.push_back(ls);
        }
        if (chunk.post_process) {
            sl.lnf_mean = take(T * f);
            sl.lnf_rstd = take(T * f);
            sl.lnf_out = take(T * h * e);
        }
        per_slot_ = total_ - start;
        slots_.push_back(std::move(sl));
    }
    const std::size_t ws_start = total_;
    ws_.grad = take(T * h * e);
    ws_.tmp1 = take(T * h * e);
    ws_.tmp2 = take(T * h * e);
    ws_.wide = take(T * static_cast<std::size_t>(std::max(d.local_qkv(), d.local_ffn())) * e);
    if (chunk.post_process) {
        ws_.logits = take(T * static_cast<std::size_t>(d.local_vocab()) * e);
        ws_.row_max = take(T * f);
        ws_.sum_exp = take(T * f);
        ws_.target_logit = take(T * f);
        ws_.loss = take(T * f);
        ws_.dloss = take(T * f);
    }
    workspace_bytes_ = total_ - ws_start;
}

}  // namespace gpt::model
