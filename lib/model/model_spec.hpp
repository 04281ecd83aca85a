// The shape of the GPT model held by one rank: global sizes, this rank's tensor-parallel
// share, and which contiguous piece of the network (a "model chunk") it runs.
#pragma once

#include <cstdint>

#include "config/config.hpp"
#include "core/dtype.hpp"
#include "core/fp8_scaling.hpp"

namespace gpt::model {

// A model chunk is a contiguous range of transformer layers plus, optionally, the
// embeddings in front (pre_process) and the final layernorm + LM head + loss behind
// (post_process). No pipelining is one chunk with everything; pipeline stages and virtual
// (interleaved) stages are just other ranges.
struct ChunkSpec {
    int first_layer = 0;
    int num_layers = 0;
    bool pre_process = true;
    bool post_process = true;
};

// Global model dimensions plus this rank's tensor-parallel coordinates.
struct ModelDims {
    int num_layers = 0;
    int hidden = 0;
    int heads = 0;
    int head_dim = 0;
    int ffn = 0;
    int seq = 0;
    int max_positions = 0;
    std::int64_t vocab_padded = 0;  // global, divisible by make-vocab-size-divisible-by x TP
    int tp_size = 1;
    int tp_rank = 0;
    // Modern decoder options (ModelConfig's; defaults are the GPT-2 architecture).
    int query_groups = 0;            // K/V heads; 0 (or == heads): no grouped-query attention
    bool rope = false;               // rotary embeddings, no position table
    int rotary_dim = 0;              // rotated dims of each head (rope)
    float rotary_base = 10000.0f;
    bool rotary_interleaved = false;
    bool rmsnorm = false;            // RMSNorm (weight only) instead of LayerNorm
    bool layernorm_1p = false;       // the norms scale by 1 + weight (--apply-layernorm-1p)
    bool swiglu = false;             // fc1 gives [gate, up]: 2 x ffn rows
    bool squared_relu = false;       // relu(x)^2 instead of GELU, a pass after fc1
    bool qk_layernorm = false;       // query and key heads normalised before rope
    bool untied_output = false;      // language_model/output_layer instead of the embeddings
    bool linear_bias = true;         // false: --disable-bias-linear

    int local_heads() const { return heads / tp_size; }
    int groups() const { return query_groups > 0 ? query_groups : heads; }
    int local_groups() const { return groups() / tp_size; }
    // The attention's expanded [np, 3, hn] width (every head its own K and V).
    int local_qkv() const { return 3 * hidden / tp_size; }
    // The fused QKV linear's output width: Megatron's grouped [ng, np/ng + 2, hn].
    int local_qkv_proj() const { return (heads + 2 * groups()) * head_dim / tp_size; }
    // The QKV output needs regrouping / rotating before the attention kernel.
    bool qkv_expanded() const { return rope || groups() != heads; }
    int local_fc1() const { return (swiglu ? 2 : 1) * ffn / tp_size; }
    int local_hidden() const { return hidden / tp_size; }  // attention context width
    int local_ffn() const { return ffn / tp_size; }
    std::int64_t local_vocab() const { return vocab_padded / tp_size; }
    std::int64_t vocab_start() const { return local_vocab() * tp_rank; }
};

// Megatron's padding: the smallest multiple of make-vocab-size-divisible-by x TP >= vocab.
std::int64_t pad_vocab_size(std::int64_t vocab, int divisible_by, int tp_size);

// Validates the config (throws UsageError naming the flag) and derives the dimensions.
ModelDims make_model_dims(const ModelConfig& cfg, std::int64_t vocab_size, int tp_size,
                          int tp_rank);

// Numerical options of the forward/backward pass.
// FP8 linear layers (issue 34; --fp8-format and its flags, resolved from config's Fp8Config):
// the four linear layers of every transformer layer outside the 16-bit first/last ones run
// their GEMMs in FP8 (forward, data gradient, and the weight gradient unless !wgrad);
// attention, norms, embedding and the output layer stay in dtype, as in Megatron.
struct Fp8Options {
    bool on = false;
    Fp8Format forward = Fp8Format::E4M3;   // activations and weights
    Fp8Format gradient = Fp8Format::E5M2;  // output gradients (E4M3 under --fp8-format e4m3)
    bool delayed = true;                   // --fp8-recipe delayed, else tensorwise (current scaling)
    int amax_history_len = 1;
    AmaxAlgo amax_compute_algo = AmaxAlgo::MostRecent;
    int margin = 0;
    bool wgrad = true;                     // --no-fp8-wgrad: weight gradients in dtype
    int bf16_layers_at_start = 0, bf16_layers_at_end = 0;  // of the model's num_layers
    // Delayed scaling: the kernels that produce QKV's, FC1's and FC2's inputs (the norms,
    // SwiGLU, GELU or squared ReLU) write those FP8 input codes themselves
    // (Backend::norm_forward_fp8, swiglu_forward_fp8, gelu_forward_fp8,
    // squared_relu_forward_fp8); GPT_FP8_INPUT_CAST=separate turns it off.
    bool fused_input_cast = true;
    // GPT's bias-GELU MLP in an FP8 layer: false (GPT_FP8_GELU=pass, the default), fc1's GEMM
    // adds the bias and a GELU pass follows (writing fc2's codes under the fused input cast);
    // true (epilogue), GELU in fc1's GEMM epilogue and fc2's input cast by a pass of its own.
    bool gelu_in_epilogue = false;
    // With FP8 weight gradients: a linear's bias gradient summed by its output gradient's cast
    // (Backend::cast_to_fp8_bias_grad); GPT_FP8_BIAS_GRAD=separate: a bias_grad pass.
    bool fused_bias_grad = true;
};

struct ModelOptions {
    DType dtype = DType::F32;         // parameters and activations
    bool flash_attention = false;     // --use-flash-attn
    bool tanh_gelu = false;           // ModelConfig::tanh_gelu()
    float hidden_dropout = 0.0f;
    float attention_dropout = 0.0f;
    float layernorm_eps = 1e-5f;
    double init_std = 0.02;
    std::uint64_t seed = 1234;        // --seed: parameter init and dropout streams

    // --sequence-parallel: the residual stream (layer inputs/outputs, layernorms, dropout)
    // holds only this TP rank's 1/tp of the sequence; all-gather / reduce-scatter replace
    // the TP all-reduces. Off (as in Megatron) when tp == 1.
    bool sequence_parallel = false;

    // Activation recomputation (--recompute-activations / --recompute-granularity):
    //  Selective: the core attention's saved buffer (probabilities or softmax statistics)
    //             is recomputed in backward instead of kept per layer.
    //  Full:      only the inputs of groups of layers are kept; backward re-runs the
    //             group's forward first. Uniform (recompute_block false): the chunk's
    //             layers in groups of recompute_num_layers. Block: the chunk's first
    //             recompute_num_layers layers, one at a time; the rest keep everything.
    // "The chunk" is one pipeline (virtual) stage, as in Megatron.
    using Recompute = RecomputeGranularity;  // the option's own enum (config/enums.hpp)
    Recompute recompute = Recompute::None;
    bool recompute_block = false;     // --recompute-method block (else uniform)
    int recompute_num_layers = 0;     // --recompute-num-layers (Full only; > 0)
    Fp8Options fp8;
    // --eod-mask-loss: the end-of-document token id whose next-token prediction the loss
    // leaves out (Megatron's loss_mask[tokens == eod] = 0: the mask sits where the *input*
    // is the EOD, so the first token of the next document is not predicted from the last
    // one's); -1: every token counts.
    std::int32_t loss_mask_token = -1;
    // --reset-position-ids / --reset-attention-mask over the inputs' end-of-document token
    // (document_token, >= 0 when either is on): positions restart at 0 after each EOD (the
    // position table's rows, rope's angles), and a token after an EOD attends to no key at
    // or before it (AttentionArgs::doc_start). Megatron's get_ltor_masks_and_position_ids.
    std::int32_t document_token = -1;
    bool reset_position_ids = false;
    bool reset_attention_mask = false;
};

// Sequence parallelism is in effect: asked for and more than one TP rank.
inline bool sequence_parallel_active(const ModelOptions& opt, const ModelDims& d) {
    return opt.sequence_parallel && d.tp_size > 1;
}

// Rejects option combinations the model cannot run (UsageError naming the flags).
void validate_model_options(const ModelOptions& opt, const ModelDims& d);

}  // namespace gpt::model
