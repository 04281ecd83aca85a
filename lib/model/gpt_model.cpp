#include "model/gpt_model.hpp"

#include <string>
#include <vector>

#include "core/errors.hpp"
#include "model/document_mask.hpp"
#include "model/param_init.hpp"

namespace gpt::model {

namespace {

std::uint64_t mix64(std::uint64_t a, std::uint64_t b) {
    std::uint64_t z = a + 0x9E3779B97F4A7C15ull * (b + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

std::size_t attention_saved(Backend& be, const ModelDims& d, const ModelOptions& opt, int mb) {
    return be.attention_saved_bytes(attention_args(d, opt, mb));
}

// RMSNorm, SwiGLU, squared ReLU, rope and grouped QKV need ops only some backends have:
// refuse the options at start-up, naming them, rather than fail in the first step.
void require_backend_ops(const Backend& be, const ModelDims& d) {
    if (be.has_decoder_ops()) return;
    std::string used;
    auto note = [&](bool on, const char* flag) {
        if (on) used += used.empty() ? flag : std::string(", ") + flag;
    };
    note(d.rmsnorm, "--normalization RMSNorm");
    note(d.swiglu, "--swiglu");
    note(d.squared_relu, "--squared-relu");
    note(d.rope, "--position-embedding-type rope");
    note(d.groups() != d.heads, "--group-query-attention");
    GPT_REQUIRE(used.empty(), UsageError, "the ", be.name(), " backend does not implement ", used,
                " yet; run them with --device cpu");
}

const ModelOptions& validated(const ModelOptions& opt, const ModelDims& d) {
    validate_model_options(opt, d);
    return opt;
}

}  // namespace

GptModel::GptModel(const ModelDims& dims, const ChunkSpec& chunk, const ModelOptions& opt,
                   int micro_batch, Backend& backend, dist::Communicator& tp, int num_slots,
                   std::int64_t buffer_multiple, const SharedArena* shared)
    : dims_(dims),
      chunk_(chunk),
      opt_(validated(opt, dims)),
      micro_batch_(micro_batch),
      be_(backend),
      tp_(tp),
      layout_(dims, chunk),
      plan_(dims, chunk, opt, micro_batch, attention_saved(backend, dims, opt, micro_batch),
            num_slots, shared ? &shared->placement : nullptr),
      slot_state_(static_cast<std::size_t>(plan_.num_slots())) {
    require_backend_ops(backend, dims);
    GPT_REQUIRE(tp.size() == dims.tp_size && tp.rank() == dims.tp_rank, InternalError,
                "TP group ", tp.rank(), "/", tp.size(), " does not match the model's ",
                dims.tp_rank, "/", dims.tp_size);
    for (int l = 0; l < chunk.num_layers; ++l)
        layer_params_.push_back(layer_offsets(layout_, chunk.first_layer + l));
    if (chunk.pre_process) {
        emb_params_.word = layout_.at(ParamLayout::word_embeddings()).offset;
        const ParamEntry* pos = layout_.find(ParamLayout::position_embeddings());
        emb_params_.position = pos ? pos->offset : -1;  // none with rope
    }
    if (chunk.post_process) {
        head_params_.ln_w = layout_.at(ParamLayout::final_ln_weight()).offset;
        const ParamEntry* ln_b = layout_.find(ParamLayout::final_ln_bias());
        head_params_.ln_b = ln_b ? ln_b->offset : -1;  // none under RMSNorm
        head_params_.word = layout_
                                .at(dims.untied_output ? ParamLayout::output_layer()
                                    : chunk.pre_process ? ParamLayout::word_embeddings()
                                                        : ParamLayout::word_embeddings_for_head())
                                .offset;
    }
    {
        // Under sequence parallelism every TP rank sees only its shard of the sequence in
        // the layernorms and after the row-parallel reductions, so those replicated
        // parameters get partial gradients. The position embeddings see the gathered
        // gradient of all rows and stay complete. The query and key norms
        // (tp_partial_grad) see only the rank's heads, with or without it (Megatron's
        // finalize_model_grads sums them too). Adjacent entries are merged into one run
        // (the alignment padding between them holds zero gradients on every rank).
        const bool sp = sequence_parallel_active(opt_, dims_);
        for (const ParamEntry& e : layout_.entries()) {
            const bool partial =
                e.tp_partial_grad || (sp && e.tp_duplicate && e.name != ParamLayout::position_embeddings());
            if (!partial) continue;
            const std::int64_t begin = e.offset, end = e.offset + e.numel;
            if (!tp_partial_runs_.empty()) {
                GradRun& last = tp_partial_runs_.back();
                constexpr std::int64_t a = ParamLayout::kAlign;
                if ((last.end + a - 1) / a * a == begin) {
                    last.end = end;
                    continue;
                }
            }
            tp_partial_runs_.push_back({begin, end});
        }
    }
    GPT_ASSERT(buffer_multiple > 0, "buffer_multiple ", buffer_multiple);
    padded_ = (layout_.total_elements() + buffer_multiple - 1) / buffer_multiple * buffer_multiple;
    const std::size_t n = static_cast<std::size_t>(padded_);
    params_ = be_.alloc(n * dtype_size(opt.dtype));
    grads_ = static_cast<float*>(be_.alloc(n * sizeof(float)));
    if (shared) {
        arena_ = shared->base;
        own_arena_ = false;
    } else {
        arena_ = static_cast<std::byte*>(be_.alloc(plan_.total_bytes()));
    }
    be_.zero(params_, n * dtype_size(opt.dtype));
    be_.zero(grads_, n * sizeof(float));
    if (opt_.fp8.on && chunk.num_layers > 0)
        fp8_ = std::make_unique<Fp8Linears>(be_, opt_.fp8, dims_, chunk.first_layer, chunk.num_layers,
                                            dims.num_layers, plan_.tokens(), opt_.dtype);
}

GptModel::~GptModel() {
    fp8_.reset();
    if (own_arena_) be_.free(arena_);
    be_.free(grads_);
    be_.free(params_);
}

ModelMemory GptModel::memory() const {
    const std::size_t n = static_cast<std::size_t>(padded_);
    const std::size_t slots = own_arena_ ? plan_.total_bytes() - plan_.workspace_bytes() : 0;
    // The FP8 copies and scaling state count as workspace.
    return ModelMemory{n * dtype_size(opt_.dtype), n * sizeof(float), slots,
                       plan_.workspace_bytes() + (fp8_ ? fp8_->device_bytes() : 0)};
}

ArenaNeeds GptModel::arena_needs(Backend& backend, const ModelDims& dims, const ChunkSpec& chunk,
                                 const ModelOptions& opt, int micro_batch) {
    const ActivationPlan one(dims, chunk, opt, micro_batch,
                             attention_saved(backend, dims, opt, micro_batch), 1);
    return ArenaNeeds{one.workspace_bytes(), one.saved_bytes_per_slot()};
}

void GptModel::init_parameters() {
    std::vector<float> host(static_cast<std::size_t>(layout_.total_elements()));
    init_parameters_host(host.data());
    set_parameters(host.data());
}

void GptModel::init_parameters_host(float* host) const {
    model::init_parameters(layout_, dims_, opt_.init_std, opt_.seed, host);
}

void GptModel::set_parameters(const float* host) {
    const std::int64_t n = layout_.total_elements();
    if (opt_.dtype == DType::F32) {
        be_.copy_to_device(params_, host, static_cast<std::size_t>(n) * sizeof(float));
        return;
    }
    // Stage through the fp32 grad buffer so the cast runs on the device; grads are zeroed
    // afterwards because setting parameters starts a fresh accumulation.
    be_.copy_to_device(grads_, host, static_cast<std::size_t>(n) * sizeof(float));
    be_.cast(grads_, DType::F32, params_, opt_.dtype, n);
    zero_grads();
}

void GptModel::get_parameters(float* host) const {
    const std::int64_t n = layout_.total_elements();
    if (opt_.dtype == DType::F32) {
        be_.copy_to_host(host, params_, static_cast<std::size_t>(n) * sizeof(float));
        return;
    }
    float* tmp = static_cast<float*>(be_.alloc(static_cast<std::size_t>(n) * sizeof(float)));
    be_.cast(params_, opt_.dtype, tmp, DType::F32, n);
    be_.copy_to_host(host, tmp, static_cast<std::size_t>(n) * sizeof(float));
    be_.free(tmp);
}

void GptModel::get_grads(float* host) const {
    be_.copy_to_host(host, grads_, static_cast<std::size_t>(layout_.total_elements()) * sizeof(float));
}

void GptModel::zero_grads() {
    be_.zero(grads_, static_cast<std::size_t>(padded_) * sizeof(float));
}

void GptModel::reduce_tp_partial_grads() {
    // Megatron's finalize_model_grads: the sequence-parallel parameters' grads, and the query
    // and key norms' (--qk-layernorm), summed over TP.
    for (const GradRun& r : tp_partial_runs_)
        tp_.all_reduce(grads_ + r.begin, r.end - r.begin, dist::CommType::F32, dist::ReduceOp::Sum);
}

void GptModel::set_batch(int slot, const std::int32_t* tokens) {
    const SlotSaved& s = plan_.slot(slot);
    const std::int64_t b = micro_batch_, sq = dims_.seq;
    std::vector<std::int32_t> inputs(static_cast<std::size_t>(b * sq));
    std::vector<std::int32_t> targets(static_cast<std::size_t>(b * sq));
    const std::int64_t vocab = dims_.vocab_padded;
    for (std::int64_t i = 0; i < b; ++i)
        for (std::int64_t j = 0; j < sq; ++j) {
            const std::int32_t in = tokens[i * (sq + 1) + j], tg = tokens[i * (sq + 1) + j + 1];
            GPT_REQUIRE(in >= 0 && in < vocab && tg >= 0 && tg < vocab, DataError, "token id ",
                        (in >= 0 && in < vocab) ? tg : in, " outside the vocabulary [0, ", vocab,
                        ")");
            inputs[static_cast<std::size_t>(i * sq + j)] = in;     // (b, s)
            targets[static_cast<std::size_t>(j * b + i)] = tg;    // rows in [s, b] order
        }
    if (chunk_.pre_process)
        be_.copy_to_device(arena_ + s.tokens, inputs.data(), inputs.size() * 4);
    if (opt_.reset_position_ids || opt_.reset_attention_mask) {
        std::vector<std::int32_t> positions(inputs.size()), doc_start(inputs.size());
        document_arrays(tokens, b, sq, sq + 1, opt_.document_token, positions.data(), doc_start.data());
        if (opt_.reset_position_ids)
            be_.copy_to_device(arena_ + s.positions, positions.data(), positions.size() * 4);
        if (opt_.reset_attention_mask)
            be_.copy_to_device(arena_ + s.doc_start, doc_start.data(), doc_start.size() * 4);
    }
    if (chunk_.post_process) {
        be_.copy_to_device(arena_ + s.targets, targets.data(), targets.size() * 4);
        SlotState& st = slot_state_.at(static_cast<std::size_t>(slot));
        st.loss_tokens = b * sq;
        st.loss_mask.clear();
        if (opt_.loss_mask_token >= 0) {
            // Megatron's GPTDataset: loss_mask[tokens == eod] = 0 on the inputs, so the
            // prediction made *from* an EOD (the next document's first token) is left out.
            st.loss_mask.assign(static_cast<std::size_t>(b * sq), 1.0f);
            for (std::int64_t i = 0; i < b; ++i)
                for (std::int64_t j = 0; j < sq; ++j)
                    if (tokens[i * (sq + 1) + j] == opt_.loss_mask_token) {
                        st.loss_mask[static_cast<std::size_t>(j * b + i)] = 0.0f;
                        --st.loss_tokens;
                    }
        }
    }
}

std::int64_t GptModel::loss_tokens(int slot) const {
    GPT_ASSERT(chunk_.post_process, "loss_tokens() of a chunk without the head");
    return slot_state_.at(static_cast<std::size_t>(slot)).loss_tokens;
}

const float* GptModel::loss_mask(int slot) const {
    const SlotState& st = slot_state_.at(static_cast<std::size_t>(slot));
    return st.loss_mask.empty() ? nullptr : st.loss_mask.data();
}

void* GptModel::input_hidden(int slot) { return arena_ + plan_.slot(slot).input; }
void* GptModel::output_hidden(int slot) {
    return const_cast<void*>(chunk_output(plan_.slot(slot)));
}
void* GptModel::output_grad() { return arena_ + plan_.workspace().grad; }
void* GptModel::input_grad() { return arena_ + plan_.workspace().grad; }

const void* GptModel::layer_input(const SlotSaved& s, int l) const {
    return arena_ + (l == 0 ? s.input : s.layers[static_cast<std::size_t>(l - 1)].x_out);
}

const void* GptModel::chunk_output(const SlotSaved& s) const {
    return layer_input(s, chunk_.num_layers);
}

void GptModel::forward_layer(const PassContext& c, const SlotSaved& s, int l) {
    transformer_layer_forward(c, layer_params_[static_cast<std::size_t>(l)],
                              s.layers[static_cast<std::size_t>(l)], layer_input(s, l),
                              chunk_.first_layer + l);
}

PassContext GptModel::context(int slot) const {
    const SlotState& st = slot_state_.at(static_cast<std::size_t>(slot));
    PassContext c;
    c.be = &be_;
    c.tp = &tp_;
    c.dims = &dims_;
    c.opt = &opt_;
    c.micro_batch = micro_batch_;
    c.tokens = plan_.tokens();
    c.sequence_parallel = sequence_parallel_active(opt_, dims_);
    c.rows = plan_.hidden_rows();
    c.first_row = c.sequence_parallel ? c.rows * dims_.tp_rank : 0;
    c.recompute_attention = plan_.attention_recomputed();
    c.params = static_cast<std::byte*>(params_);
    c.grads = grads_;
    c.arena = arena_;
    c.ws = &plan_.workspace();
    c.dropout = st.training;
    c.training = st.training;
    c.fp8 = fp8_.get();
    c.hidden_key = mix64(opt_.seed, st.stream);
    // Megatron's tensor-parallel RNG: seed + 2718 + tp_rank inside the TP region.
    c.attention_key = mix64(opt_.seed + 2718 + static_cast<std::uint64_t>(dims_.tp_rank), st.stream);
    const SlotSaved& saved = plan_.slot(slot);
    if (opt_.reset_position_ids) c.positions = reinterpret_cast<const std::int32_t*>(arena_ + saved.positions);
    if (opt_.reset_attention_mask) c.doc_start = reinterpret_cast<const std::int32_t*>(arena_ + saved.doc_start);
    return c;
}

double GptModel::forward(int slot, bool training, std::uint64_t dropout_stream) {
    SlotState& st = slot_state_.at(static_cast<std::size_t>(slot));
    st.training = training;
    st.stream = dropout_stream;
    st.forwarded = true;
    const PassContext c = context(slot);
    const SlotSaved& s = plan_.slot(slot);
    if (chunk_.pre_process)
        embedding_forward(c, emb_params_, reinterpret_cast<const std::int32_t*>(arena_ + s.tokens),
                          arena_ + s.input);
    for (int l = 0; l < chunk_.num_layers; ++l) forward_layer(c, s, l);
    if (!chunk_.post_process) return 0.0;
    head_slot_ = slot;
    return head_forward(c, head_params_, s, chunk_output(s), loss_mask(slot));
}

const void* GptModel::logits() const {
    GPT_ASSERT(chunk_.post_process && head_slot_ >= 0, "logits() without a forward of the last chunk");
    return arena_ + plan_.workspace().logits;
}

void GptModel::backward(int slot, float dloss_per_token) {
    SlotState& st = slot_state_.at(static_cast<std::size_t>(slot));
    GPT_ASSERT(st.forwarded, "backward of slot ", slot, " without a forward");
    st.forwarded = false;
    const PassContext c = context(slot);
    const SlotSaved& s = plan_.slot(slot);
    if (chunk_.post_process) {
        // The logits live in the shared workspace, not the slot. A schedule that ran another
        // micro-batch's head since this one's forward (the interleaved warm-up on the last
        // stage) needs them again: recompute them, deterministically (one GEMM and the
        // cross-entropy statistics; dropout does not reach the head).
        if (head_slot_ != slot) head_forward(c, head_params_, s, chunk_output(s), loss_mask(slot));
        head_backward(c, head_params_, s, chunk_output(s), dloss_per_token, loss_mask(slot));
        head_slot_ = -1;  // turned into their gradient in place
        // The head's own entries (final layernorm, a pipeline's head copy of the word
        // embeddings) follow the last layer's; the tied word embeddings of a one-stage
        // model come first in the buffer and are final only after the embedding.
        if (grad_ready_) grad_ready_(head_params_.ln_w);
    }
    const std::vector<LayerGroup>& groups = plan_.groups();
    for (auto g = groups.rbegin(); g != groups.rend(); ++g) {
        // Full recomputation: refill the group's buffers from its kept input. The same
        // dropout streams make every value bit-identical to the first forward (the group's
        // kept output is rewritten with what it already holds).
        if (g->recompute)
            for (int l = g->first; l < g->first + g->count; ++l) forward_layer(c, s, l);
        for (int l = g->first + g->count - 1; l >= g->first; --l) {
            transformer_layer_backward(c, layer_params_[static_cast<std::size_t>(l)],
                                       s.layers[static_cast<std::size_t>(l)], layer_input(s, l),
                                       chunk_.first_layer + l);
            if (grad_ready_) grad_ready_(layer_params_[static_cast<std::size_t>(l)].ln1_w);
        }
    }
    if (chunk_.pre_process)
        embedding_backward(c, emb_params_, reinterpret_cast<const std::int32_t*>(arena_ + s.tokens),
                           arena_ + plan_.workspace().grad);
    if (grad_ready_) grad_ready_(0);
}

}  // namespace gpt::model
