// Inference forward of the GPT with a KV cache, over lib/model's parameter layout and the
// Backend's ops: the same layer math as the training forward (model/transformer_layer.cpp)
// with dropout off, run on a growing prefix instead of a fixed sequence. Every architecture
// option of the model runs: LayerNorm or RMSNorm, learned positions or rope (rotary-percent,
// interleaved), GELU or SwiGLU, grouped-query attention, tied or untied output, with or
// without linear biases.
//
// The cache of each layer holds one key and one value per query group (not per head), K and
// V each [max_len, b, ng, hn] (layout and the gathers that fill it: kv_cache_layout.hpp):
//   prompt pass (first position 0, n tokens):  QKV projection, qkv_expand (rope at
//                                                positions 0..n-1) and attention_forward over
//                                                the n positions, exactly the training ops;
//                                                then each group's K/V rows copied in
//   one-token step (position p > 0):            the projection's rows rotated to position p
//                                                (one GEMM with rope_matrix(p)); K/V
//                                                appended; per group, its heads' queries
//                                                against the group's cached keys [0, p]:
//                                                scores = q K^T / sqrt(hn), softmax, P V as
//                                                batched GEMMs over (sequence, group)
// Tensor parallel: each rank holds its groups' cache and its vocabulary shard; the logits
// are gathered so every rank sees the whole vocabulary.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "dist/communicator.hpp"
#include "model/model_spec.hpp"
#include "model/param_layout.hpp"

namespace gpt::inference {

class KvModel {
public:
    // host_params: this TP rank's parameters as fp32, laid out as ParamLayout(dims, whole
    // model); cast to opt.dtype on the backend.
    KvModel(const model::ModelDims& dims, const model::ModelOptions& opt, Backend& be,
            dist::Communicator& tp, const std::vector<float>& host_params);
    ~KvModel();
    KvModel(const KvModel&) = delete;
    KvModel& operator=(const KvModel&) = delete;

    const model::ModelDims& dims() const { return dims_; }
    const model::ModelOptions& options() const { return opt_; }

    // Empties the cache for `batch` sequences of at most max_len positions each
    // (<= max_position_embeddings).
    void start(int batch, int max_len);
    // Positions already in the cache (the same for every sequence of the batch).
    int position() const { return pos_; }

    // Runs tokens (batch, n) (host, row-major per sequence) at positions [position(),
    // position() + n) and caches them. A pass at position 0 may take any n (the prompt);
    // later passes take one token. Returns fp32 logits over the whole padded vocabulary:
    // (batch, V) of the last position, or (n, batch, V) of every position when
    // all_positions.
    std::vector<float> forward(const std::int32_t* tokens, int n, bool all_positions = false);

private:
    struct Buffer;
    void* buf(int id, std::size_t bytes);
    void* param(std::int64_t off) const;
    void norm(const void* x, std::int64_t w, std::int64_t b, void* y, std::int64_t rows);
    const void* rotate_step(const void* proj, std::int64_t rows);
    void append_kv(int layer, const void* keys, const void* values, const std::vector<std::int32_t>& key_rows,
                   std::int64_t table_rows);
    void attention_step(int layer, const void* grouped, void* ctx);
    std::vector<float> head(const void* x, std::int64_t rows);

    model::ModelDims dims_;
    model::ModelOptions opt_;
    Backend& be_;
    dist::Communicator& tp_;
    model::ParamLayout layout_;
    std::vector<model::LayerParamOffsets> layers_;
    void* params_ = nullptr;
    std::vector<void*> k_cache_, v_cache_;  // per layer, [max_len, batch, ng, hn]
    std::vector<std::pair<void*, std::size_t>> scratch_;
    int batch_ = 0, max_len_ = 0, pos_ = 0;
};

}  // namespace gpt::inference
