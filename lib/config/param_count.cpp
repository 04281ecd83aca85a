#include "config/param_count.hpp"

namespace gpt {

std::int64_t qkv_rows(const ParamDims& d) {
    const std::int64_t g = d.query_groups > 0 ? d.query_groups : d.heads;
    return (d.heads + 2 * g) * d.head_dim;
}

std::int64_t fc1_rows(const ParamDims& d) { return (d.swiglu ? 2 : 1) * d.ffn; }

std::int64_t norm_params(const ParamDims& d) { return d.rmsnorm ? d.hidden : 2 * d.hidden; }

std::int64_t layer_params_per_rank(const ParamDims& d, int tp) {
    const std::int64_t h = d.hidden, f = d.ffn;
    const std::int64_t qkv_out = qkv_rows(d), fc1_out = fc1_rows(d);
    const std::int64_t bias = d.linear_bias ? 1 : 0;
    const std::int64_t qk_norms = d.qk_layernorm ? 2 * (d.rmsnorm ? 1 : 2) * d.head_dim : 0;
    const std::int64_t norms = 2 * norm_params(d) + qk_norms;
    const std::int64_t qkv = (qkv_out * h + bias * qkv_out) / tp;
    const std::int64_t dense = h * h / tp + bias * h;
    const std::int64_t fc1 = (fc1_out * h + bias * fc1_out) / tp;
    const std::int64_t fc2 = h * f / tp + bias * h;
    return norms + qkv + dense + fc1 + fc2;
}

ChunkParams chunk_params(const ParamDims& d, int tp, int num_layers, bool pre_process, bool post_process) {
    const std::int64_t word_shard = d.vocab_padded / tp * d.hidden;
    ChunkParams c;
    c.layers = std::int64_t(num_layers) * layer_params_per_rank(d, tp);
    if (pre_process) c.embedding = word_shard + (d.position_table ? d.max_positions * d.hidden : 0);
    if (post_process) {
        c.final_norm = norm_params(d);
        if (d.untied_output || !pre_process) c.lm_head = word_shard;
    }
    return c;
}

}  // namespace gpt
