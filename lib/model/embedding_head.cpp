#include "model/embedding_head.hpp"

#include <vector>

#include "model/linear.hpp"
#include "model/norm.hpp"
#include "model/sequence_parallel.hpp"
#include "model/tp_mappings.hpp"

namespace gpt::model {

void embedding_forward(const PassContext& c, const EmbeddingParams& p, const std::int32_t* tokens,
                       void* out) {
    const ModelDims& d = *c.dims;
    const DType t = c.opt->dtype;
    const std::int64_t b = c.micro_batch, s = d.seq, h = d.hidden;
    // Sequence parallel: the whole (T, h) sum is formed in the workspace, then split.
    void* full = c.sequence_parallel ? c.act(c.ws->gathered) : out;
    c.be->embedding_forward(tokens, c.param(p.word), full, b, s, h, d.vocab_start(),
                            d.vocab_start() + d.local_vocab(), t);
    // VocabParallelEmbedding: each rank contributes the rows of its vocab shard.
    reduce_from_tensor_model_parallel_region_forward(*c.tp, full, c.tokens * h, t);
    if (p.position >= 0 && c.positions) {
        // --reset-position-ids: each token's own row of the table, looked up as the words
        // are (tmp1 is free until the first layer), then added in fp32 as the plain case adds.
        void* pe = c.act(c.ws->tmp1);
        c.be->embedding_forward(c.positions, c.param(p.position), pe, b, s, h, 0, d.max_positions, t);
        c.be->add(full, pe, full, c.tokens * h, t);
    } else if (p.position >= 0) {  // none with rotary embeddings
        c.be->position_embedding_forward(c.param(p.position), full, b, s, h, 0, t);
    }
    // scatter_to_sequence_parallel_region: forward keeps this rank's rows, no communication.
    if (c.sequence_parallel)
        c.be->copy(out, static_cast<std::byte*>(full) + c.first_row * h * dtype_size(t),
                   static_cast<std::size_t>(c.rows * h) * dtype_size(t));
    if (c.dropout && c.opt->hidden_dropout > 0.0f)
        c.be->dropout_forward(out, out, c.rows * h, c.opt->hidden_dropout, c.hidden_key,
                              embedding_dropout_offset() + c.shard_offset(), t);
}

void embedding_backward(const PassContext& c, const EmbeddingParams& p,
                        const std::int32_t* tokens, void* grad) {
    const ModelDims& d = *c.dims;
    const DType t = c.opt->dtype;
    const std::int64_t b = c.micro_batch, s = d.seq, h = d.hidden;
    // Dropout's backward is the same masked scaling applied to the gradient.
    if (c.dropout && c.opt->hidden_dropout > 0.0f)
        c.be->dropout_forward(grad, grad, c.rows * h, c.opt->hidden_dropout, c.hidden_key,
                              embedding_dropout_offset() + c.shard_offset(), t);
    void* full = grad;
    if (c.sequence_parallel) {
        full = c.act(c.ws->gathered);
        scatter_to_sequence_parallel_region_backward(*c.tp, grad, full, c.rows * h, t);
    }
    if (p.position >= 0 && c.positions)  // each token's gradient into its position's row
        c.be->embedding_backward(c.positions, full, c.grad(p.position), b, s, h, 0, d.max_positions, t);
    else if (p.position >= 0)
        c.be->position_embedding_backward(full, c.grad(p.position), b, s, h, 0, t);
    c.be->embedding_backward(tokens, full, c.grad(p.word), b, s, h, d.vocab_start(),
                             d.vocab_start() + d.local_vocab(), t);
}

double head_forward(const PassContext& c, const HeadParams& p, const SlotSaved& s,
                    const void* x_final, const float* loss_mask) {
    Backend& be = *c.be;
    const ModelDims& d = *c.dims;
    const DType t = c.opt->dtype;
    const std::int64_t T = c.tokens, h = d.hidden, V = d.local_vocab();
    const Workspace& ws = *c.ws;
    norm_forward(c, x_final, p.ln_w, p.ln_b, c.act(s.lnf_out), c.actf(s.lnf_mean),
                 c.actf(s.lnf_rstd), c.rows);
    // Logits (T, V/tp) of every token stay in the workspace and are turned into their own
    // gradient in place by head_backward.
    const void* x = column_parallel_input(c, c.act(s.lnf_out), c.act(ws.gathered));
    linear_forward(be, x, c.param(p.word), c.act(ws.logits), T, h, V, t);
    const auto* targets = reinterpret_cast<const std::int32_t*>(c.act(s.targets));
    if (c.tp->size() == 1) {
        // The whole vocabulary is here: max, exp-sum and target logit in one pass over the
        // (T, V) logits, the largest activation of the model.
        be.cross_entropy_stats(c.act(ws.logits), targets, c.actf(ws.row_max), c.actf(ws.sum_exp),
                               c.actf(ws.target_logit), T, V, d.vocab_start(), t);
    } else {
        // Vocab-parallel: the exp-sums must be taken against the global max, so reduce it first.
        be.cross_entropy_max(c.act(ws.logits), c.actf(ws.row_max), T, V, t);
        vocab_parallel_cross_entropy_max(*c.tp, c.actf(ws.row_max), T);
        be.cross_entropy_sums(c.act(ws.logits), targets, c.actf(ws.row_max), c.actf(ws.sum_exp),
                              c.actf(ws.target_logit), T, V, d.vocab_start(), t);
        vocab_parallel_cross_entropy_sum(*c.tp, c.actf(ws.sum_exp), T);
        vocab_parallel_cross_entropy_sum(*c.tp, c.actf(ws.target_logit), T);
    }
    be.cross_entropy_loss(c.actf(ws.row_max), c.actf(ws.sum_exp), c.actf(ws.target_logit),
                          c.actf(ws.loss), T);
    if (loss_mask == nullptr) return be.sum(c.actf(ws.loss), T);
    // Masked: the T losses come to the host (a few KiB; be.sum synchronises as well) and
    // are summed there in double, in row order, alike on every backend.
    std::vector<float> loss(static_cast<std::size_t>(T));
    be.copy_to_host(loss.data(), c.actf(ws.loss), loss.size() * sizeof(float));
    double sum = 0.0;
    for (std::size_t i = 0; i < loss.size(); ++i)
        if (loss_mask[i] != 0.0f) sum += loss[i];
    return sum;
}

void head_backward(const PassContext& c, const HeadParams& p, const SlotSaved& s,
                   const void* x_final, float dloss_per_token, const float* loss_mask) {
    Backend& be = *c.be;
    const ModelDims& d = *c.dims;
    const DType t = c.opt->dtype;
    const std::int64_t T = c.tokens, h = d.hidden, V = d.local_vocab();
    const Workspace& ws = *c.ws;
    std::vector<float> dloss(static_cast<std::size_t>(T), dloss_per_token);
    if (loss_mask != nullptr)
        for (std::size_t i = 0; i < dloss.size(); ++i) dloss[i] *= loss_mask[i];
    be.copy_to_device(c.act(ws.dloss), dloss.data(), dloss.size() * sizeof(float));
    const auto* targets = reinterpret_cast<const std::int32_t*>(c.act(s.targets));
    void* logits = c.act(ws.logits);
    be.cross_entropy_backward(logits, targets, c.actf(ws.row_max), c.actf(ws.sum_exp),
                              c.actf(ws.dloss), logits, T, V, d.vocab_start(), t);
    // Sequence parallel saves only the shard of the final LN's output: gather it again.
    const void* x = column_parallel_input(c, c.act(s.lnf_out), c.act(ws.gathered));
    linear_weight_grad(be, logits, x, c.grad(p.word), T, h, V, t);
    void* tmp1 = c.act(ws.tmp1);
    linear_input_grad(be, logits, c.param(p.word), tmp1, T, h, V, t);
    const void* dln = column_parallel_input_grad(c, tmp1, c.act(ws.tmp2));
    norm_backward(c, dln, x_final, p.ln_w, p.ln_b, c.actf(s.lnf_mean), c.actf(s.lnf_rstd),
                  nullptr, c.act(ws.grad), c.rows);
}

}  // namespace gpt::model
