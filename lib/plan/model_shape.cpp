#include "plan/model_shape.hpp"

#include "config/config.hpp"
#include "config/param_count.hpp"
#include "config/params_dtype.hpp"
#include "config/vocab_padding.hpp"
#include "core/environment.hpp"
#include "core/errors.hpp"

namespace gpt::plan {

ParamDims param_dims(const ModelShape& m, int tp) {
    ParamDims d;
    d.hidden = m.hidden;
    d.heads = m.heads;
    d.head_dim = m.hidden / m.heads;
    d.ffn = m.ffn;
    d.query_groups = m.query_groups;
    d.max_positions = m.max_positions;
    d.vocab_padded = padded_vocab(m, tp);
    d.swiglu = m.swiglu;
    d.linear_bias = m.linear_bias;
    d.rmsnorm = m.rmsnorm;
    d.position_table = m.position_table;
    d.untied_output = m.untied_output;
    d.qk_layernorm = m.qk_layernorm;
    return d;
}

std::int64_t qkv_rows(const ModelShape& m) { return gpt::qkv_rows(param_dims(m, 1)); }

std::int64_t fc1_rows(const ModelShape& m) { return gpt::fc1_rows(param_dims(m, 1)); }

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
    m.squared_relu = mc.squared_relu;
    m.qk_layernorm = mc.qk_layernorm;
    m.linear_bias = !mc.disable_bias_linear;
    m.rmsnorm = mc.rmsnorm();
    m.position_table = !mc.rope();
    m.untied_output = mc.untie_embeddings_and_output_weights;
    m.document_arrays = int(cfg.data.reset_position_ids) + int(cfg.data.reset_attention_mask);
    m.fp8 = cfg.fp8;
    m.fp8_fused_input_cast = !env::fp8_input_cast_separate();
    m.fp8_gelu_epilogue = env::fp8_gelu_epilogue();
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
    return gpt::layer_params_per_rank(param_dims(m, tp), tp);
}

std::int64_t layer_linear_weights_per_rank(const ModelShape& m, int tp) {
    const std::int64_t h = m.hidden, f = m.ffn;
    return (qkv_rows(m) * h + h * h + fc1_rows(m) * h + f * h) / tp;
}

int fp8_layers_on_stage(const ModelShape& m, int pp, int vp, int stage, const PipelineSplit& split) {
    GPT_ASSERT(pp > 0 && vp > 0 && stage >= 0 && stage < pp);
    if (!m.fp8.enabled()) return 0;
    const std::vector<int> chunks = pipeline_chunk_layers(m.num_layers, pp, vp, split);
    int n = 0, first = 0;
    for (int vstage = 0; vstage < pp * vp; ++vstage) {
        const int layers = chunks[static_cast<std::size_t>(vstage)];
        if (vstage % pp == stage)
            for (int layer = first; layer < first + layers; ++layer) n += m.fp8.layer_in_fp8(layer, m.num_layers);
        first += layers;
    }
    return n;
}

StageParams stage_params(const ModelShape& m, int tp, int pp, int stage, const PipelineSplit& split, int vp) {
    GPT_ASSERT(pp > 0 && vp > 0 && stage >= 0 && stage < pp);
    const ChunkParams c = chunk_params(param_dims(m, tp), tp, pipeline_stage_layers(m.num_layers, pp, vp, split, stage),
                                       stage == 0, stage == pp - 1);
    return StageParams{c.embedding, c.layers, c.final_norm, c.lm_head};
}

// One copy of everything: the whole model as a single chunk at TP 1, with the vocabulary
// padded for tp.
std::int64_t total_params(const ModelShape& m, int tp) {
    return chunk_params(param_dims(m, tp), 1, m.num_layers, true, true).total();
}

}  // namespace gpt::plan
