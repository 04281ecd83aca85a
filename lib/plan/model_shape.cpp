#include "plan/model_shape.hpp"

#include "config/config.hpp"
#include "config/params_dtype.hpp"
#include "config/vocab_padding.hpp"
#include "core/errors.hpp"

namespace gpt::plan {

std::int64_t qkv_rows(const ModelShape& m) {
    const std::int64_t g = m.query_groups > 0 ? m.query_groups : m.heads;
    return (m.heads + 2 * g) * (m.hidden / m.heads);
}

std::int64_t fc1_rows(const ModelShape& m) { return (m.swiglu ? 2 : 1) * std::int64_t(m.ffn); }

ModelShape model_shape_from_config(const Config& cfg) {
    const ModelConfig& mc = cfg.model;
    ModelShape m;
    m.num_layers = mc.num_layers;
    m.hidden = mc.hidden_size;
    m.heads = mc.num_attention_heads;
    m.ffn = mc.ffn();
    m.seq = mc.seq_length;
    m.max_positions = mc.max_position_embeddings > 0 ? mc.max_position_embeddings : mc.seq_length;
    // GPT-2's BPE vocabulary when the tokenizer has not been read (plan-only needs no files).
    m.vocab = mc.vocab_size > 0 ? mc.vocab_size : 50257;
    m.vocab_divisible_by = mc.make_vocab_size_divisible_by;
    m.dtype = params_dtype(cfg.training);
    m.flash_attention = cfg.parallel.use_flash_attn;
    m.query_groups = mc.query_groups();
    m.swiglu = mc.swiglu;
    m.linear_bias = !mc.disable_bias_linear;
    m.rmsnorm = mc.rmsnorm();
    m.position_table = !mc.rope();
    m.untied_output = mc.untie_embeddings_and_output_weights;
    m.fp8 = cfg.fp8;
    GPT_REQUIRE(m.num_layers > 0 && m.hidden > 0 && m.heads > 0 && m.seq > 0, UsageError,
                "the planner needs --num-layers, --hidden-size, --num-attention-heads and --seq-length (got ",
                m.num_layers, ", ", m.hidden, ", ", m.heads, ", ", m.seq, ")");
    GPT_REQUIRE(m.hidden % m.heads == 0, UsageError, "hidden size ", m.hidden,
                " is not divisible by the number of attention heads ", m.heads);
    return m;
}

std::int64_t padded_vocab(const ModelShape& m, int tp) {
    return pad_vocab(m.vocab, m.vocab_divisible_by > 0 ? m.vocab_divisible_by : 1, tp);
}

std::int64_t layer_params_per_rank(const ModelShape& m, int tp) {
    const std::int64_t h = m.hidden, f = m.ffn;
    const std::int64_t qkv_out = qkv_rows(m), fc1_out = fc1_rows(m);
    const std::int64_t bias = m.linear_bias ? 1 : 0;
    std::int64_t norms = 2 * (m.rmsnorm ? h : 2 * h);
    std::int64_t qkv = (qkv_out * h + bias * qkv_out) / tp;
    std::int64_t dense = h * h / tp + bias * h;
    std::int64_t fc1 = (fc1_out * h + bias * fc1_out) / tp;
    std::int64_t fc2 = h * f / tp + bias * h;
    return norms + qkv + dense + fc1 + fc2;
}

std::int64_t layer_linear_weights_per_rank(const ModelShape& m, int tp) {
    const std::int64_t h = m.hidden, f = m.ffn;
    return (qkv_rows(m) * h + h * h + fc1_rows(m) * h + f * h) / tp;
}

int fp8_layers_on_stage(const ModelShape& m, int pp, int vp, int stage) {
    GPT_ASSERT(pp > 0 && vp > 0 && stage >= 0 && stage < pp && m.num_layers % (pp * vp) == 0);
    if (!m.fp8.enabled()) return 0;
    const int per_chunk = m.num_layers / (pp * vp);
    int n = 0;
    for (int c = 0; c < vp; ++c) {
        const int first = (c * pp + stage) * per_chunk;
        for (int layer = first; layer < first + per_chunk; ++layer) n += m.fp8.layer_in_fp8(layer, m.num_layers);
    }
    return n;
}

StageParams stage_params(const ModelShape& m, int tp, int pp, int stage) {
    GPT_ASSERT(pp > 0 && stage >= 0 && stage < pp && m.num_layers % pp == 0);
    const std::int64_t h = m.hidden;
    const std::int64_t word_shard = padded_vocab(m, tp) / tp * h;
    StageParams s;
    s.layers = std::int64_t(m.num_layers / pp) * layer_params_per_rank(m, tp);
    if (stage == 0) s.embedding = word_shard + (m.position_table ? std::int64_t(m.max_positions) * h : 0);
    if (stage == pp - 1) {
        s.final_norm = m.rmsnorm ? h : 2 * h;
        if (pp > 1 || m.untied_output) s.lm_head = word_shard;
    }
    return s;
}

std::int64_t total_params(const ModelShape& m, int tp) {
    const std::int64_t h = m.hidden;
    const std::int64_t vocab = padded_vocab(m, tp) * h;
    return std::int64_t(m.num_layers) * layer_params_per_rank(m, 1) + vocab * (m.untied_output ? 2 : 1) +
           (m.position_table ? std::int64_t(m.max_positions) * h : 0) + (m.rmsnorm ? h : 2 * h);
}

}  // namespace gpt::plan
