// How many parameters a GPT decoder holds, the one count: the planner's memory model
// (lib/plan/model_shape) and the model's flat-buffer layout (lib/model/param_layout, which
// checks its table against it) both read it, so the planned and the real buffers cannot
// drift apart. It lives here, below both, as plain arithmetic on the dimensions.
#pragma once

#include <cstdint>

namespace gpt {

// The dimensions that decide the parameter count (ModelConfig's, with the vocabulary
// already padded for the tensor-parallel size the count is for).
struct ParamDims {
    std::int64_t hidden = 0;          // h
    std::int64_t heads = 0;           // a
    std::int64_t head_dim = 0;        // h / a
    std::int64_t ffn = 0;             // f
    std::int64_t query_groups = 0;    // K/V heads; 0: heads
    std::int64_t max_positions = 0;
    std::int64_t vocab_padded = 0;    // global V_pad, divisible by TP
    bool swiglu = false;              // fc1 holds 2 f rows (gate and up)
    bool linear_bias = true;
    bool rmsnorm = false;             // norms without bias
    bool position_table = true;       // false with rope
    bool untied_output = false;       // an output layer of V_pad x h besides the embeddings
    bool qk_layernorm = false;        // a query and a key norm over hn per layer
};

// Output rows of the fused QKV linear, (a + 2 g) hn (3h without grouped-query attention),
// and of fc1 (2f with SwiGLU), before the TP split.
std::int64_t qkv_rows(const ParamDims& d);
std::int64_t fc1_rows(const ParamDims& d);

// One norm's parameters: weight and bias, or RMSNorm's weight alone.
std::int64_t norm_params(const ParamDims& d);

// Parameters of one transformer layer held by one TP rank: the two norms (and the query
// and key norms of hn) replicated; QKV
// and fc1 split by rows incl. biases; attention dense and fc2 split by columns with their
// biases (h each) replicated.
std::int64_t layer_params_per_rank(const ParamDims& d, int tp);

// What one model chunk of one TP rank holds: the first (pre_process) holds the word-embedding
// shard (V_pad/t x h) and the replicated position table; the last (post_process) the final
// norm and, when untied or when it does not also hold the embeddings, a head of V_pad/t x h
// (the untied output layer, or the tied copy kept equal by the embedding-group all-reduce).
struct ChunkParams {
    std::int64_t embedding = 0;   // word shard + position table
    std::int64_t layers = 0;      // the chunk's transformer layers
    std::int64_t final_norm = 0;
    std::int64_t lm_head = 0;
    std::int64_t total() const { return embedding + layers + final_norm + lm_head; }
};
ChunkParams chunk_params(const ParamDims& d, int tp, int num_layers, bool pre_process, bool post_process);

}  // namespace gpt
