// The GPT shape the planner reasons about, and its parameter count per pipeline stage and
// tensor-parallel rank, written analytically from Megatron's GPT layout (see model_shape.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "config/param_count.hpp"
#include "core/dtype.hpp"

namespace gpt::plan {

struct ModelShape {
    int num_layers = 0;
    int hidden = 0;           // h
    int heads = 0;            // a
    int ffn = 0;              // f (4h for GPT)
    int seq = 0;              // s
    int max_positions = 0;
    int vocab = 0;            // unpadded V
    int vocab_divisible_by = 128;
    DType dtype = DType::F32;  // parameter/activation type (fp16/bf16 train with fp32 main params)
    bool flash_attention = false;
    // The Llama-style options (ModelConfig's): the parameter counts, the memory model (fc1's
    // width) and the time model (QKV and fc1 GEMM widths) follow them.
    int query_groups = 0;         // K/V heads; 0: heads
    bool swiglu = false;          // fc1 holds 2 f rows
    bool squared_relu = false;    // relu(x)^2: a pass after fc1, no GELU epilogue
    bool qk_layernorm = false;    // query and key norms: two passes over QKV, its copy saved
    bool linear_bias = true;
    bool rmsnorm = false;         // norms without bias
    bool position_table = true;   // false with rope
    bool untied_output = false;   // an output layer of V_pad x h besides the embeddings
    // --reset-position-ids and --reset-attention-mask: (b, s) int32 arrays every micro-batch
    // slot of every chunk keeps (the documents' positions, their first keys): 0, 1 or 2.
    int document_arrays = 0;
    // FP8 (--fp8-format and its flags): the linear layers' GEMMs of the layers it covers run
    // at the device's FP8 rate and keep FP8 weight copies and scaling state; off by default.
    Fp8Config fp8;
    // Delayed scaling's fused input casts (GPT_FP8_INPUT_CAST, fused by default): the norms
    // write QKV's and FC1's input codes, gathered as bytes under sequence parallelism, and an
    // activation pass (SwiGLU, GELU without bias) FC2's.
    bool fp8_fused_input_cast = true;
    // GPT_FP8_GELU=epilogue: an FP8 layer's bias-GELU runs in fc1's GEMM epilogue; by default
    // (pass) fc1's GEMM adds the bias only and a GELU pass writes fc2's input (and codes).
    bool fp8_gelu_epilogue = false;
};

// The shape's parameter-bearing dimensions with the vocabulary padded for tp: what the one
// parameter count (config/param_count.hpp) reads.
ParamDims param_dims(const ModelShape& m, int tp);

// Output rows of the fused QKV linear, (a + 2 g) h / a (3h without grouped-query attention),
// and of fc1 (2f with SwiGLU's gate and up), before the TP split.
std::int64_t qkv_rows(const ModelShape& m);
std::int64_t fc1_rows(const ModelShape& m);

// Shape of cfg.model with cfg.training's precision. vocab 0 means GPT-2's 50257.
ModelShape model_shape_from_config(const Config& cfg);

// Vocabulary padded to a multiple of vocab_divisible_by x tp (Megatron's
// _vocab_size_with_padding), so every TP rank holds the same number of rows.
std::int64_t padded_vocab(const ModelShape& m, int tp);

// Parameters of one transformer layer held by one TP rank (config/param_count.hpp's count):
// LayerNorms replicated (2 x 2h); QKV (3h x h + 3h) and fc1 (f x h + f) split by rows incl.
// biases; attention dense (h x h) and fc2 (h x f) split by columns with their biases (h
// each) replicated.
std::int64_t layer_params_per_rank(const ModelShape& m, int tp);

// What one (pipeline stage, TP rank) holds. Stage 0 holds the word-embedding shard
// (V_pad/t x h) and the replicated position embeddings; the last stage holds the final
// LayerNorm and, when pp > 1, its own copy of the word-embedding shard for the tied LM head
// (kept equal to stage 0's by the embedding-group all-reduce).
struct StageParams {
    std::int64_t embedding = 0;   // word shard + position embeddings (stage 0)
    std::int64_t layers = 0;      // the stage's transformer layers (all virtual chunks)
    std::int64_t final_norm = 0;  // last stage
    std::int64_t lm_head = 0;     // last stage when pp > 1: tied copy of the word shard; or the untied output layer
    std::int64_t total() const { return embedding + layers + final_norm + lm_head; }
};
// The stage's layers as `split` assigns them over vp virtual stages each (config/pipeline_split.hpp;
// default even; a stage's total depends on vp only with a layout string).
StageParams stage_params(const ModelShape& m, int tp, int pp, int stage, const PipelineSplit& split = {}, int vp = 1);

// Weight elements (no biases) of one layer's four linear layers held by one TP rank: what
// FP8 casts, (q + h + f1 + f) h / t.
std::int64_t layer_linear_weights_per_rank(const ModelShape& m, int tp);

// Transformer layers of pipeline stage `stage` (its vp model chunks, Megatron's interleaved
// assignment: chunk c holds virtual stage c pp + stage) whose linear GEMMs run in FP8: all
// of them under FP8 but --first-last-layers-bf16's first and last; 0 without FP8.
int fp8_layers_on_stage(const ModelShape& m, int pp, int vp, int stage, const PipelineSplit& split = {});

// Unique parameters of the whole model (one copy of the tied embedding), padded vocab at tp.
std::int64_t total_params(const ModelShape& m, int tp = 1);

}  // namespace gpt::plan
