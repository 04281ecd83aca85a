// Where every parameter of one rank lives in the flat parameter/gradient buffers.
//
// Model params (dtype), fp32 grads and, in lib/optim, fp32 main params and Adam moments
// all share these element offsets, so data-parallel buckets, ZeRO sharding and checkpoint
// I/O are offset arithmetic. Names and global shapes are Megatron's checkpoint names; each
// entry also records which slice of the global tensor this rank holds under tensor
// parallelism, so initialisation and checkpoints never depend on the layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_spec.hpp"

namespace gpt::model {

enum class ParamInit { Normal, ScaledNormal, Zero, One };

struct ParamEntry {
    std::string name;                        // e.g. language_model/encoder/layers.3/mlp/...
    std::vector<std::int64_t> global_shape;  // [out, in] for linear weights
    int split_dim = -1;                      // dim split over TP; -1: replicated
    std::vector<std::int64_t> local_shape;   // this rank's slice
    std::int64_t slice_start = 0;            // first index of the slice along split_dim
    std::int64_t offset = 0;                 // elements into the flat buffers
    std::int64_t numel = 0;                  // local elements
    ParamInit init = ParamInit::Normal;
    bool weight_decay = true;                // false for biases and layernorm (1-D params)
    // The same values on every TP rank (layernorm, row-parallel biases, position
    // embeddings): counted once in the grad norm, and their grads are identical across TP.
    bool tp_duplicate = false;
    // Replicated, but each TP rank's share of the heads gives only a part of its gradient
    // (--qk-layernorm's norms): summed over TP before the optimizer, as under sequence
    // parallelism.
    bool tp_partial_grad = false;
    int layer = -1;                          // global layer index; -1: embedding / head
};

class ParamLayout {
public:
    // Entries are laid out in forward order, each starting at a multiple of kAlign elements
    // (so fp16 and fp32 views of every parameter are 128-byte aligned).
    ParamLayout(const ModelDims& dims, const ChunkSpec& chunk);

    static constexpr std::int64_t kAlign = 64;

    const std::vector<ParamEntry>& entries() const { return entries_; }
    std::int64_t total_elements() const { return total_; }
    const ParamEntry& at(const std::string& name) const;  // throws InternalError if absent
    const ParamEntry* find(const std::string& name) const;
    // Index of the entry holding flat element `offset` (binary search), for bucketing.
    std::size_t entry_index(std::int64_t offset) const;

    // Megatron names of the pieces the model looks up by layer.
    static std::string layer_prefix(int layer);
    static const char* word_embeddings() { return "language_model/embedding/word_embeddings/weight"; }
    static const char* position_embeddings() { return "language_model/embedding/position_embeddings/weight"; }
    static const char* final_ln_weight() { return "language_model/encoder/final_layernorm/weight"; }
    static const char* final_ln_bias() { return "language_model/encoder/final_layernorm/bias"; }
    // The last pipeline stage's copy of the tied word embeddings (Megatron's
    // word_embeddings_for_head) when it does not also hold the first stage.
    static const char* word_embeddings_for_head() { return "word_embeddings_for_head/weight"; }
    // The untied head (--untie-embeddings-and-output-weights), Megatron's output_layer.
    static const char* output_layer() { return "language_model/output_layer/weight"; }

private:
    void add(std::string name, std::vector<std::int64_t> global_shape, int split_dim,
             ParamInit init, int layer, const ModelDims& dims);

    std::vector<ParamEntry> entries_;
    std::int64_t total_ = 0;
};

// Per-layer parameter pointers (in elements of the flat buffers), resolved once; -1 for a
// parameter the architecture does not have (biases under RMSNorm or --disable-bias-linear).
struct LayerParamOffsets {
    std::int64_t ln1_w, ln1_b, qkv_w, qkv_b, dense_w, dense_b, ln2_w, ln2_b, fc1_w, fc1_b,
        fc2_w, fc2_b;
    std::int64_t q_norm_w, q_norm_b, k_norm_w, k_norm_b;  // --qk-layernorm
};
LayerParamOffsets layer_offsets(const ParamLayout& layout, int layer);

// --qk-layernorm's query or key norm (weight or bias): Megatron matches them by name too
// (--apply-wd-to-qk-layernorm).
bool is_qk_norm(const ParamEntry& e);

// Megatron's is_embedding_or_output_parameter (--decoupled-lr): the word embeddings, the
// untied output layer, or the last stage's copy of the tied embeddings.
bool is_embedding_or_output(const ParamEntry& e);

}  // namespace gpt::model
