#include "model/model_spec.hpp"

#include "config/vocab_padding.hpp"
#include "core/errors.hpp"

namespace gpt::model {

std::int64_t pad_vocab_size(std::int64_t vocab, int divisible_by, int tp_size) {
    GPT_REQUIRE(vocab > 0, UsageError, "vocab size must be positive (got ", vocab, ")");
    GPT_REQUIRE(divisible_by > 0, UsageError,
                "--make-vocab-size-divisible-by must be positive (got ", divisible_by, ")");
    return pad_vocab(vocab, divisible_by, tp_size);
}

namespace {

// The modern decoder options, with the rules that need the TP size (the rest are checked
// in config/validate.cpp; repeated here where a test builds dims without it).
void set_decoder_options(ModelDims& d, const ModelConfig& cfg) {
    d.query_groups = cfg.query_groups();
    GPT_REQUIRE(d.query_groups > 0 && d.heads % d.query_groups == 0, UsageError,
                "--num-attention-heads ", d.heads, " is not divisible by --num-query-groups ",
                d.query_groups);
    // Megatron replicates K/V heads when groups < TP; we keep every rank's groups whole.
    GPT_REQUIRE(d.query_groups % d.tp_size == 0, UsageError, "--num-query-groups ", d.query_groups,
                " is not divisible by --tensor-model-parallel-size ", d.tp_size,
                " (K/V heads replicated over TP are not supported)");
    d.rope = cfg.rope();
    if (d.rope) {
        GPT_REQUIRE(cfg.rotary_percent > 0.0 && cfg.rotary_percent <= 1.0, UsageError,
                    "--rotary-percent must be in (0, 1], got ", cfg.rotary_percent);
        d.rotary_dim = static_cast<int>(d.head_dim * cfg.rotary_percent);
        GPT_REQUIRE(d.rotary_dim >= 2 && d.rotary_dim % 2 == 0, UsageError, "--rotary-percent ",
                    cfg.rotary_percent, " of head dim ", d.head_dim, " gives ", d.rotary_dim,
                    " rotary dims; rope needs an even number >= 2");
        d.rotary_base = static_cast<float>(cfg.rotary_base);
        d.rotary_interleaved = cfg.rotary_interleaved;
    }
    d.rmsnorm = cfg.rmsnorm();
    d.layernorm_1p = cfg.apply_layernorm_1p;
    d.swiglu = cfg.swiglu;
    d.squared_relu = cfg.squared_relu;
    d.qk_layernorm = cfg.qk_layernorm;
    GPT_REQUIRE(!(d.swiglu && d.squared_relu), UsageError,
                "--squared-relu and --swiglu are two different MLP activations; give one");
    d.untied_output = cfg.untie_embeddings_and_output_weights;
    d.linear_bias = !cfg.disable_bias_linear;
}

}  // namespace

ModelDims make_model_dims(const ModelConfig& cfg, std::int64_t vocab_size, int tp_size,
                          int tp_rank) {
    GPT_REQUIRE(cfg.num_layers > 0, UsageError, "--num-layers must be positive");
    GPT_REQUIRE(cfg.hidden_size > 0, UsageError, "--hidden-size must be positive");
    GPT_REQUIRE(cfg.num_attention_heads > 0, UsageError, "--num-attention-heads must be positive");
    GPT_REQUIRE(cfg.hidden_size % cfg.num_attention_heads == 0, UsageError, "--hidden-size ",
                cfg.hidden_size, " is not divisible by --num-attention-heads ",
                cfg.num_attention_heads);
    GPT_REQUIRE(cfg.seq_length > 0, UsageError, "--seq-length must be positive");
    GPT_REQUIRE(tp_size > 0 && tp_rank >= 0 && tp_rank < tp_size, InternalError,
                "bad TP coordinates ", tp_rank, "/", tp_size);
    GPT_REQUIRE(cfg.num_attention_heads % tp_size == 0, UsageError, "--num-attention-heads ",
                cfg.num_attention_heads, " is not divisible by --tensor-model-parallel-size ",
                tp_size);
    ModelDims d;
    d.num_layers = cfg.num_layers;
    d.hidden = cfg.hidden_size;
    d.heads = cfg.num_attention_heads;
    d.head_dim = cfg.head_dim();
    d.ffn = cfg.ffn();
    GPT_REQUIRE(d.ffn % tp_size == 0, UsageError, "--ffn-hidden-size ", d.ffn,
                " is not divisible by --tensor-model-parallel-size ", tp_size);
    d.seq = cfg.seq_length;
    d.max_positions = cfg.max_position_embeddings > 0 ? cfg.max_position_embeddings : cfg.seq_length;
    GPT_REQUIRE(d.max_positions >= d.seq, UsageError, "--max-position-embeddings ",
                d.max_positions, " is smaller than --seq-length ", d.seq);
    d.vocab_padded = pad_vocab_size(vocab_size, cfg.make_vocab_size_divisible_by, tp_size);
    d.tp_size = tp_size;
    d.tp_rank = tp_rank;
    set_decoder_options(d, cfg);
    return d;
}

void validate_model_options(const ModelOptions& opt, const ModelDims& d) {
    // Each TP rank holds whole sequence positions of every sample: rows [r T/tp, (r+1) T/tp)
    // of the [s, b] row order are positions [r s/tp, (r+1) s/tp).
    GPT_REQUIRE(!sequence_parallel_active(opt, d) || d.seq % d.tp_size == 0, UsageError,
                "--sequence-parallel needs --seq-length ", d.seq,
                " divisible by --tensor-model-parallel-size ", d.tp_size);
    GPT_REQUIRE(opt.recompute != ModelOptions::Recompute::Full || opt.recompute_num_layers > 0,
                UsageError, "--recompute-granularity full needs --recompute-num-layers >= 1 (got ",
                opt.recompute_num_layers, ")");
}

}  // namespace gpt::model
