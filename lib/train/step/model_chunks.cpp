#include "train/step/model_chunks.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/errors.hpp"
#include "train/step/chunk_layout.hpp"
#include "train/step/dropout_stream.hpp"

namespace gpt::train {

ModelChunks::ModelChunks(const RunConfig& run, dist::ProcessGroups& groups, dist::DataGroups& data,
                         Backend& backend)
    : groups_(groups), data_(data), be_(backend), num_micro_batches_(run.num_micro_batches),
      per_token_loss_(run.cfg.training.calculate_per_token_loss) {
    const Config& cfg = run.cfg;
    const std::int64_t num_micro_batches = run.num_micro_batches;
    const int v = pipeline_num_chunks(cfg, groups);
    const int micro_batch = cfg.training.micro_batch_size;
    const model::ModelDims dims = model::make_model_dims(
        cfg.model, cfg.model.vocab_size, groups.grid().tp_size(), groups.coords().tp);
    const model::ModelOptions& opt = run.model_options;
    // Several chunks share one arena of micro-batch slots, sized for the schedule.
    if (v > 1)
        shared_ = std::make_unique<SharedActivations>(cfg, groups, be_, dims, opt, micro_batch,
                                                      num_micro_batches);
    for (int c = 0; c < v; ++c) {
        chunks_.push_back(std::make_unique<model::GptModel>(
            dims, pipeline_chunk_spec(cfg, groups, c), opt, micro_batch, be_, data.tp(),
            pipeline_slots(cfg, groups, num_micro_batches, c), grad_buffer_multiple(cfg, groups),
            shared_ ? &shared_->arena(c) : nullptr));
        chunks_.back()->init_parameters();
        optimizers_.push_back(make_optimizer(cfg, groups, data, *chunks_.back()));
    }
    for (int c = 0; c < v; ++c) {
        const int n = pipeline_slots(cfg, groups, num_micro_batches, c);
        GPT_ASSERT(chunk(c).plan().num_slots() >= n, "chunk ", c,
                   " has fewer micro-batch slots than its schedule needs (", n, ")");
    }
    for (int c = 0; c < v; ++c)
        reducers_.push_back(make_grad_reducer(cfg, groups, data, chunk(c), optimizer(c)));
    if (device_p2p()) {
        // The backend's caching allocator hands the same blocks back every iteration.
        space_.alloc = [this](std::size_t bytes) { return be_.alloc(bytes); };
        space_.free = [this](void* p) { be_.free(p); };
    }
    slots_.resize(static_cast<std::size_t>(v));
    sample_elems_ = static_cast<std::size_t>(micro_batch) * (dims.seq + 1);
    tokens_.resize(sample_elems_ * static_cast<std::size_t>(num_micro_batches));
}

ModelChunks::~ModelChunks() = default;

void ModelChunks::to_boundary(void* buffer, const void* activation, std::size_t bytes) {
    if (device_p2p()) be_.copy(buffer, activation, bytes);
    else be_.copy_to_host(buffer, activation, bytes);
}

void ModelChunks::from_boundary(void* activation, const void* buffer, std::size_t bytes) {
    if (device_p2p()) be_.copy(activation, buffer, bytes);
    else be_.copy_to_device(activation, buffer, bytes);
}

LossTally ModelChunks::stage_forward(int mb, int c, int slot, const void* in, void* out,
                                     std::size_t act_bytes, bool train, std::uint64_t stream) {
    model::GptModel& m = chunk(c);
    if (m.needs_batch()) m.set_batch(slot, tokens_of(mb));
    if (in) from_boundary(m.input_hidden(slot), in, act_bytes);
    const double l = m.forward(slot, train, stream);
    if (out) to_boundary(out, m.output_hidden(slot), act_bytes);
    if (!m.chunk().post_process) return {};
    return {l, static_cast<double>(m.loss_tokens(slot))};
}

pipeline::PipelineShape ModelChunks::shape(bool forward_only, std::int64_t micro_batches) const {
    const model::GptModel& m = *chunks_.front();
    pipeline::PipelineShape sh;
    sh.pp_size = groups_.grid().pp_size();
    sh.stage = groups_.coords().pp;
    sh.num_microbatches = static_cast<int>(micro_batches);
    sh.num_chunks = num_chunks();
    // (T, h) replicated over TP, or this rank's (T/tp, h) sequence shard.
    sh.activation_count = m.hidden_rows() * m.dims().hidden;
    sh.type = dist::comm_type(m.options().dtype);
    sh.forward_only = forward_only;
    return sh;
}

void ModelChunks::read_batch(MicroBatchSource& data, std::int64_t micro_batches) {
    for (std::int64_t mb = 0; mb < micro_batches; ++mb)
        data.next(tokens_.data() + static_cast<std::size_t>(mb) * sample_elems_);
}

const std::int32_t* ModelChunks::tokens_of(int mb) const {
    return tokens_.data() + static_cast<std::size_t>(mb) * sample_elems_;
}

std::vector<int>& ModelChunks::free_slots(int chunk) {
    return shared_ ? pool_free_ : slots_.at(static_cast<std::size_t>(chunk)).free;
}

void ModelChunks::reset_slots() {
    for (std::size_t c = 0; c < slots_.size(); ++c) {
        Slots& s = slots_[c];
        s.free.clear();
        if (!shared_)
            for (int i = chunks_[c]->plan().num_slots() - 1; i >= 0; --i) s.free.push_back(i);
        s.of_mb.assign(static_cast<std::size_t>(num_micro_batches_), -1);
    }
    // Shared: every chunk's plan has the pool's slots, any of which it may take.
    pool_free_.clear();
    if (shared_)
        for (int i = chunks_.front()->plan().num_slots() - 1; i >= 0; --i) pool_free_.push_back(i);
}

int ModelChunks::take_slot(int chunk, int mb) {
    Slots& s = slots_.at(static_cast<std::size_t>(chunk));
    std::vector<int>& free = free_slots(chunk);
    GPT_ASSERT(!free.empty(), "no free micro-batch slot on chunk ", chunk, " for micro-batch ", mb);
    const int slot = free.back();
    free.pop_back();
    s.of_mb.at(static_cast<std::size_t>(mb)) = slot;
    return slot;
}

int ModelChunks::release_slot(int chunk, int mb) {
    Slots& s = slots_.at(static_cast<std::size_t>(chunk));
    const int slot = s.of_mb.at(static_cast<std::size_t>(mb));
    GPT_ASSERT(slot >= 0, "backward of micro-batch ", mb, " on chunk ", chunk, " before its forward");
    s.of_mb[static_cast<std::size_t>(mb)] = -1;
    free_slots(chunk).push_back(slot);
    return slot;
}

LossTally ModelChunks::global_tally(LossTally local) {
    // Megatron all-reduces [sum, count] over the data-parallel group and reports sum / count.
    double t[2] = {local.sum, local.tokens};
    if (groups_.grid().dp_size() > 1) groups_.dp().all_reduce(t, 2, dist::CommType::F64, dist::ReduceOp::Sum);
    // Megatron logs on the last stage; every rank gets the value so all take the same
    // decisions (the NaN check, skipped-iteration bookkeeping, the per-token divisor).
    if (groups_.pp().size() > 1) {
        if (!groups_.is_last_stage()) t[0] = t[1] = 0.0;
        groups_.pp().all_reduce(t, 2, dist::CommType::F64, dist::ReduceOp::Sum);
    }
    return {t[0], t[1]};
}

LossTally ModelChunks::forward_backward(MicroBatchSource& data, double loss_scale,
                                        std::uint64_t first_stream, std::int64_t micro_batches) {
    GPT_ASSERT(micro_batches >= 1 && micro_batches <= num_micro_batches_, "an iteration of ", micro_batches,
               " micro-batches, outside [1, ", num_micro_batches_, "]");
    const int dp = groups_.grid().dp_size(), dp_rank = groups_.coords().dp;
    const pipeline::PipelineShape sh = shape(false, micro_batches);
    const std::size_t act_bytes =
        static_cast<std::size_t>(sh.activation_count) * dist::comm_type_size(sh.type);
    {
        Timers::Scope phase(timers_, Phase::BatchGenerator);
        read_batch(data, micro_batches);
    }
    reset_slots();
    for (auto& m : chunks_) {
        m->zero_grads();
        m->fp8_weights_changed();  // the optimizer (or a load) changed them since the last pass
    }
    LossTally loss;
    // Megatron's forward_step_calc_loss: each micro-batch's loss is its mean over its counted
    // tokens (at least 1), over the micro-batches; 1/dp is folded in here so the
    // data-parallel reduction is a plain sum. With per-token loss, the sum as it is.
    const double mean_divisor = static_cast<double>(micro_batches * dp);
    auto dloss_of = [&](const model::GptModel& m, int slot) {
        if (!m.chunk().post_process) return 0.0f;
        if (per_token_loss_) return static_cast<float>(loss_scale);
        const auto counted = static_cast<double>(std::max<std::int64_t>(m.loss_tokens(slot), 1));
        return static_cast<float>(loss_scale / (counted * mean_divisor));
    };
    pipeline::StageFunctions fn;
    fn.forward = [&](int mb, int c, const void* in, void* out) {
        // Streams follow the global batch order, so a run's dropout masks depend neither on
        // how the batch is split over data-parallel ranks nor on the pipeline layout.
        const std::uint64_t stream = dropout_stream(first_stream + static_cast<std::uint64_t>(mb), dp, dp_rank);
        loss += stage_forward(mb, c, take_slot(c, mb), in, out, act_bytes, true, stream);
    };
    fn.backward = [&](int mb, int c, const void* grad_out, void* grad_in) {
        model::GptModel& m = chunk(c);
        const int slot = release_slot(c, mb);
        if (grad_out) from_boundary(m.output_grad(), grad_out, act_bytes);
        // Each chunk runs its micro-batches' backwards in order: the last one finishes the
        // iteration's gradients, so its buckets may start reducing as they complete.
        if (mb == micro_batches - 1) reducers_[static_cast<std::size_t>(c)]->start_final_backward();
        m.backward(slot, dloss_of(m, slot));
        if (grad_in) to_boundary(grad_in, m.input_grad(), act_bytes);
    };
    timing_ = pipeline::run_pipeline(sh, data_.pp(), fn, space_, timers_);
    finalize_grads();
    // FP8 delayed scaling: this step's amaxes, reduced over TP and DP, give the next step's scales.
    for (auto& m : chunks_) m->fp8_end_step(data_.dp());
    local_loss_ = loss.sum / std::max(loss.tokens, 1.0);
    return global_tally(loss);
}

void ModelChunks::finalize_grads() {
    if (grads_done_hook_) grads_done_hook_();
    // Tied embeddings: the first stage's word-embedding grad and the last stage's head copy
    // both become their sum, so the two copies take identical Adam steps (Megatron's
    // allreduce of word-embedding grads over the embedding group).
    // Untied (--untie-embeddings-and-output-weights): two separate tensors, nothing to sum.
    // The NaN check of the held-back buckets reads this rank's own gradients, before the sum.
    for (auto& r : reducers_) r->check_held_back();
    {
        // Timed on every rank of a pipelined run, as Megatron does, so that the level-1 timer's
        // barrier (--no-barrier-with-level-1-timing) is reached by all ranks.
        const bool tied = !chunks_.front()->dims().untied_output;
        Timers::Scope embedding_phase(groups_.grid().pp_size() > 1 && tied ? timers_ : nullptr,
                                      Phase::EmbeddingGradsAllReduce);
        if (groups_.embedding().size() > 1 && tied) {
            model::GptModel* holder = nullptr;
            const char* name = nullptr;
            if (chunks_.front()->chunk().pre_process) {
                holder = chunks_.front().get();
                name = model::ParamLayout::word_embeddings();
            } else if (chunks_.back()->chunk().post_process) {
                holder = chunks_.back().get();
                name = model::ParamLayout::word_embeddings_for_head();
            }
            GPT_ASSERT(holder != nullptr, "rank in the embedding group holds no word embeddings");
            const auto& e = holder->layout().at(name);
            data_.embedding().all_reduce(holder->grads() + e.offset, e.numel, dist::CommType::F32,
                                         dist::ReduceOp::Sum);
        }
    }
    {
        Timers::Scope phase(timers_, Phase::AllGradsSync);
        for (auto& r : reducers_) r->finish();
    }
    // Sequence parallelism leaves each TP rank a partial sum of the layernorm and
    // row-parallel bias grads, --qk-layernorm of the query and key norms' grads.
    // (Timed only where Megatron has the phase: sequence parallelism over more than one TP rank.)
    const bool sp = groups_.grid().tp_size() > 1 && chunks_.front()->options().sequence_parallel;
    Timers::Scope phase(sp ? timers_ : nullptr, Phase::LayernormGradsAllReduce);
    for (auto& m : chunks_) m->reduce_tp_partial_grads();
}

void ModelChunks::set_timers(Timers* t) {
    timers_ = t;
    for (auto& o : optimizers_) o->set_timers(t);
}

std::string ModelChunks::local_non_finite_grad() const {
    for (const auto& r : reducers_)
        if (std::string name = r->local_non_finite(); !name.empty()) return name;
    return "";
}

void ModelChunks::set_before_reduce_hook(int c, std::function<void(float*, const GradBucket&)> h) {
    reducers_.at(static_cast<std::size_t>(c))->set_before_reduce_hook(std::move(h));
}

std::string ModelChunks::first_non_finite_grad() {
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
        model::GptModel& m = *chunks_[c];
        const optim::AdamOptimizer& o = *optimizers_[c];
        const std::int64_t lo = o.shard_begin(), hi = o.shard_begin() + o.shard_size();
        for (const auto& e : m.layout().entries()) {
            const std::int64_t b = std::max(lo, e.offset), end = std::min(hi, e.offset + e.numel);
            if (b < end && !be_.grad_stats(m.grads() + b, end - b).finite) return e.name;
        }
    }
    return "";
}

optim::StepResult ModelChunks::step(double lr, double decoupled_lr, double weight_decay, double grad_divisor) {
    optim::GradNorm norm;
    {
        // The grad norm clipping needs; the overflow check rides in the same pass.
        Timers::Scope phase(timers_, Phase::OptimizerClipMainGrad);
        optim::GradStatShares stats{0.0, 0.0, 0.0};
        for (auto& o : optimizers_) {
            const auto s = o->local_grad_stats();
            for (std::size_t k = 0; k < stats.size(); ++k) stats[k] += s[k];
        }
        auto& mp = optimizers_.front()->norm_group();
        if (mp.size() > 1)
            mp.all_reduce(stats.data(), static_cast<std::int64_t>(stats.size()), dist::CommType::F64,
                          dist::ReduceOp::Sum);
        norm = optim::AdamOptimizer::finish_grad_norm(stats, grad_divisor);
    }
    optim::StepResult r;
    for (auto& o : optimizers_) {
        o->set_weight_decay(weight_decay);
        o->set_decoupled_lr(decoupled_lr);
        r = o->step(lr, grad_divisor, norm);
    }
    return r;
}

double ModelChunks::params_norm() {
    double sum = 0.0;
    for (auto& o : optimizers_) sum += o->local_param_sum_squares();
    auto& group = optimizers_.front()->norm_group();
    if (group.size() > 1) group.all_reduce(&sum, 1, dist::CommType::F64, dist::ReduceOp::Sum);
    return std::sqrt(sum);
}

double ModelChunks::evaluate(MicroBatchSource& data, int iters) {
    const pipeline::PipelineShape sh = shape(true, num_micro_batches_);
    const std::size_t act_bytes =
        static_cast<std::size_t>(sh.activation_count) * dist::comm_type_size(sh.type);
    LossTally total;
    for (auto& m : chunks_) m->fp8_weights_changed();
    pipeline::StageFunctions fn;
    fn.forward = [&](int mb, int c, const void* in, void* out) {
        total += stage_forward(mb, c, take_slot(c, mb), in, out, act_bytes, false, 0);
        release_slot(c, mb);  // no backward follows: the slot is free once the output is out
    };
    fn.backward = [](int, int, const void*, void*) {
        throw InternalError("backward pass in a forward-only pipeline schedule");
    };
    for (int it = 0; it < iters; ++it) {
        read_batch(data, num_micro_batches_);
        reset_slots();
        pipeline::run_pipeline(sh, data_.pp(), fn, space_);
    }
    // Megatron's evaluate: the [sum, count] pairs of every iteration, then sum / count.
    return mean_loss(global_tally(total), "evaluation");
}

MemoryReport ModelChunks::memory() const {
    MemoryReport r;
    for (int c = 0; c < num_chunks(); ++c) {
        const auto mm = chunk(c).memory();
        const auto om = optimizer(c).memory();
        r.params += mm.params;
        r.grads += mm.grads;
        r.optimizer += om.main_params + om.moments;
        r.activations += mm.activations;
        r.buffers += mm.workspace;
    }
    if (shared_) r.activations += shared_->slot_pool_bytes();
    return r;
}

}  // namespace gpt::train
