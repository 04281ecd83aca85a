// Inference forward of the GPT with a KV cache, over lib/model's parameter layout and the
// Backend's ops: the same layer math as the training forward (model/transformer_layer.cpp)
// with dropout off, run on a growing prefix instead of a fixed sequence.
//
// The cache of each layer is that layer's whole QKV activation, [max_len, b, np, 3, hn] as
// the training forward lays it out, so the QKV projection writes new positions straight
// into it and the prompt's pass is the training attention op over a prefix of it; one
// cached position costs 1.5x what K and V alone would (Q kept beside them).
//   prompt pass (first position 0, n tokens):  attention_forward over the n positions,
//                                                exactly the training op
//   one-token step (position p > 0):            scores = q K^T / sqrt(hn) over positions
//                                                [0, p], softmax, P V: batched GEMMs on
//                                                the cache's strided K and V
// Tensor parallel: each rank holds its heads' cache and its vocabulary shard; the logits
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
    void attention_step(int layer, void* qkv_cache, void* ctx);
    std::vector<float> head(const void* x, std::int64_t rows);

    model::ModelDims dims_;
    model::ModelOptions opt_;
    Backend& be_;
    dist::Communicator& tp_;
    model::ParamLayout layout_;
    std::vector<model::LayerParamOffsets> layers_;
    void* params_ = nullptr;
    std::vector<void*> cache_;  // per layer, [max_len, batch, np, 3, hn]
    std::vector<std::pair<void*, std::size_t>> scratch_;
    int batch_ = 0, max_len_ = 0, pos_ = 0;
};

}  // namespace gpt::inference
