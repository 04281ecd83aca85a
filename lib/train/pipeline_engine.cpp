#include "train/pipeline_engine.hpp"

#include <algorithm>

#include "core/errors.hpp"
#include "pipeline/schedule.hpp"

namespace gpt::train {

int pipeline_num_chunks(const Config& cfg, const dist::ProcessGroups& groups) {
    const int p = groups.grid().pp_size(), L = cfg.model.num_layers;
    const int per_virtual = cfg.parallel.num_layers_per_virtual_pipeline_stage;
    GPT_REQUIRE(L % p == 0, UsageError, "--num-layers ", L,
                " is not divisible by --pipeline-model-parallel-size ", p,
                ": pipeline stages need equal layer counts");
    if (per_virtual <= 0) return 1;
    GPT_REQUIRE(p > 1, UsageError,
                "--num-layers-per-virtual-pipeline-stage needs --pipeline-model-parallel-size > 1");
    GPT_REQUIRE((L / p) % per_virtual == 0, UsageError, "layers per pipeline stage ", L / p,
                " (--num-layers ", L, " / PP ", p,
                ") is not divisible by --num-layers-per-virtual-pipeline-stage ", per_virtual);
    return L / p / per_virtual;
}

model::ChunkSpec pipeline_chunk_spec(const Config& cfg, const dist::ProcessGroups& groups,
                                     int chunk) {
    const int p = groups.grid().pp_size(), s = groups.coords().pp;
    const int v = pipeline_num_chunks(cfg, groups);
    GPT_ASSERT(chunk >= 0 && chunk < v, "chunk ", chunk, " outside 0..", v - 1);
    const int per_vstage = cfg.model.num_layers / (p * v);
    const int vstage = chunk * p + s;  // Megatron's interleaved assignment
    return model::ChunkSpec{vstage * per_vstage, per_vstage, vstage == 0, vstage == p * v - 1};
}

namespace {
// The most forwarded-but-not-yet-backward micro-batches of `chunk` (-1: of all chunks).
int most_alive(const Config& cfg, const dist::ProcessGroups& groups,
               std::int64_t num_micro_batches, int chunk) {
    const int p = groups.grid().pp_size();
    if (p == 1) return 1;  // the trainer's own loop: one micro-batch at a time
    const int v = pipeline_num_chunks(cfg, groups);
    const auto schedule = pipeline::make_schedule(p, groups.coords().pp,
                                                  static_cast<int>(num_micro_batches), v);
    int live = 0, most = 0;
    for (const auto& a : schedule) {
        if (chunk >= 0 && a.chunk != chunk) continue;
        live += a.pass == pipeline::Pass::Forward ? 1 : -1;
        most = std::max(most, live);
    }
    return std::max(most, 1);
}
}  // namespace

int pipeline_slots(const Config& cfg, const dist::ProcessGroups& groups,
                   std::int64_t num_micro_batches, int chunk) {
    return most_alive(cfg, groups, num_micro_batches, chunk);
}

int pipeline_pooled_slots(const Config& cfg, const dist::ProcessGroups& groups,
                          std::int64_t num_micro_batches) {
    return most_alive(cfg, groups, num_micro_batches, -1);
}

PipelineEngine::PipelineEngine(const Config& cfg, dist::ProcessGroups& groups, dist::DataGroups& data,
                               Backend& backend,
                               const model::ModelOptions& opt, std::int64_t num_micro_batches,
                               model::GptModel& chunk0, optim::AdamOptimizer& optimizer0,
                               const SharedActivations* shared)
    : cfg_(cfg), groups_(groups), data_(data), be_(backend), num_micro_batches_(num_micro_batches),
      pooled_(shared != nullptr) {
    const int v = pipeline_num_chunks(cfg, groups);
    chunks_.push_back(&chunk0);
    optimizers_.push_back(&optimizer0);
    for (int c = 1; c < v; ++c) {
        owned_chunks_.push_back(std::make_unique<model::GptModel>(
            chunk0.dims(), pipeline_chunk_spec(cfg, groups, c), opt, chunk0.micro_batch(), be_,
            data.tp(), pipeline_slots(cfg, groups, num_micro_batches, c),
            grad_buffer_multiple(cfg, groups), shared ? &shared->arena(c) : nullptr));
        owned_chunks_.back()->init_parameters();
        owned_optimizers_.push_back(make_optimizer(cfg, groups, data, *owned_chunks_.back()));
        chunks_.push_back(owned_chunks_.back().get());
        optimizers_.push_back(owned_optimizers_.back().get());
    }
    for (int c = 0; c < v; ++c) {
        const int n = pipeline_slots(cfg, groups, num_micro_batches, c);
        GPT_ASSERT(chunks_[static_cast<std::size_t>(c)]->plan().num_slots() >= n, "chunk ", c,
                   " has fewer micro-batch slots than its schedule needs (", n, ")");
    }
    for (int c = 0; c < v; ++c)
        reducers_.push_back(make_grad_reducer(cfg, groups, data, *chunks_[static_cast<std::size_t>(c)],
                                              *optimizers_[static_cast<std::size_t>(c)]));
    if (device_p2p()) {
        // The backend's caching allocator hands the same blocks back every iteration.
        space_.alloc = [this](std::size_t bytes) { return be_.alloc(bytes); };
        space_.free = [this](void* p) { be_.free(p); };
    }
    slots_.resize(static_cast<std::size_t>(v));
    sample_elems_ = static_cast<std::size_t>(chunk0.micro_batch()) * (chunk0.dims().seq + 1);
    tokens_.resize(sample_elems_ * static_cast<std::size_t>(num_micro_batches));
}

PipelineEngine::~PipelineEngine() = default;

void PipelineEngine::to_boundary(void* buffer, const void* activation, std::size_t bytes) {
    if (device_p2p()) be_.copy(buffer, activation, bytes);
    else be_.copy_to_host(buffer, activation, bytes);
}

void PipelineEngine::from_boundary(void* activation, const void* buffer, std::size_t bytes) {
    if (device_p2p()) be_.copy(activation, buffer, bytes);
    else be_.copy_to_device(activation, buffer, bytes);
}

double PipelineEngine::stage_forward(int mb, int c, int slot, const void* in, void* out,
                                     std::size_t act_bytes, bool train, std::uint64_t stream) {
    model::GptModel& m = *chunks_[static_cast<std::size_t>(c)];
    if (m.chunk().pre_process || m.chunk().post_process) m.set_batch(slot, tokens_of(mb));
    if (in) from_boundary(m.input_hidden(slot), in, act_bytes);
    const double l = m.forward(slot, train, stream);
    if (out) to_boundary(out, m.output_hidden(slot), act_bytes);
    return m.chunk().post_process ? l / static_cast<double>(m.tokens()) : 0.0;
}

pipeline::PipelineShape PipelineEngine::shape(bool forward_only) const {
    const model::GptModel& m = *chunks_.front();
    pipeline::PipelineShape sh;
    sh.pp_size = groups_.grid().pp_size();
    sh.stage = groups_.coords().pp;
    sh.num_microbatches = static_cast<int>(num_micro_batches_);
    sh.num_chunks = num_chunks();
    // (T, h) replicated over TP, or this rank's (T/tp, h) sequence shard.
    sh.activation_count = m.hidden_rows() * m.dims().hidden;
    sh.type = dist::comm_type(m.options().dtype);
    sh.forward_only = forward_only;
    return sh;
}

void PipelineEngine::read_batch(MicroBatchSource& data) {
    for (std::int64_t mb = 0; mb < num_micro_batches_; ++mb)
        data.next(tokens_.data() + static_cast<std::size_t>(mb) * sample_elems_);
}

const std::int32_t* PipelineEngine::tokens_of(int mb) const {
    return tokens_.data() + static_cast<std::size_t>(mb) * sample_elems_;
}

std::vector<int>& PipelineEngine::free_slots(int chunk) {
    return pooled_ ? pool_free_ : slots_.at(static_cast<std::size_t>(chunk)).free;
}

void PipelineEngine::reset_slots() {
    for (std::size_t c = 0; c < slots_.size(); ++c) {
        Slots& s = slots_[c];
        s.free.clear();
        if (!pooled_)
            for (int i = chunks_[c]->plan().num_slots() - 1; i >= 0; --i) s.free.push_back(i);
        s.of_mb.assign(static_cast<std::size_t>(num_micro_batches_), -1);
    }
    // Shared: every chunk's plan has the pool's slots, any of which it may take.
    pool_free_.clear();
    if (pooled_)
        for (int i = chunks_.front()->plan().num_slots() - 1; i >= 0; --i) pool_free_.push_back(i);
}

int PipelineEngine::take_slot(int chunk, int mb) {
    Slots& s = slots_.at(static_cast<std::size_t>(chunk));
    std::vector<int>& free = free_slots(chunk);
    GPT_ASSERT(!free.empty(), "no free micro-batch slot on chunk ", chunk, " for micro-batch ", mb);
    const int slot = free.back();
    free.pop_back();
    s.of_mb.at(static_cast<std::size_t>(mb)) = slot;
    return slot;
}

int PipelineEngine::release_slot(int chunk, int mb) {
    Slots& s = slots_.at(static_cast<std::size_t>(chunk));
    const int slot = s.of_mb.at(static_cast<std::size_t>(mb));
    GPT_ASSERT(slot >= 0, "backward of micro-batch ", mb, " on chunk ", chunk, " before its forward");
    s.of_mb[static_cast<std::size_t>(mb)] = -1;
    free_slots(chunk).push_back(slot);
    return slot;
}

double PipelineEngine::from_last_stage(double value) {
    if (!groups_.is_last_stage()) value = 0.0;
    groups_.pp().all_reduce(&value, 1, dist::CommType::F64, dist::ReduceOp::Sum);
    return value;
}

double PipelineEngine::forward_backward(MicroBatchSource& data, float dloss,
                                        std::uint64_t first_stream) {
    const int dp = groups_.grid().dp_size(), dp_rank = groups_.coords().dp;
    const std::size_t act_bytes = static_cast<std::size_t>(shape(false).activation_count) *
                                  dist::comm_type_size(shape(false).type);
    read_batch(data);
    reset_slots();
    for (auto* m : chunks_) m->zero_grads();
    double loss = 0.0;
    pipeline::StageFunctions fn;
    fn.forward = [&](int mb, int c, const void* in, void* out) {
        // The single-rank stream of this micro-batch, so dropout masks match that run.
        const std::uint64_t stream = (first_stream + static_cast<std::uint64_t>(mb)) * dp + dp_rank;
        loss += stage_forward(mb, c, take_slot(c, mb), in, out, act_bytes, true, stream);
    };
    fn.backward = [&](int mb, int c, const void* grad_out, void* grad_in) {
        model::GptModel& m = *chunks_[static_cast<std::size_t>(c)];
        const int slot = release_slot(c, mb);
        if (grad_out) from_boundary(m.output_grad(), grad_out, act_bytes);
        // Each chunk runs its micro-batches' backwards in order: the last one finishes the
        // iteration's gradients, so its buckets may start reducing as they complete.
        if (mb == num_micro_batches_ - 1) reducers_[static_cast<std::size_t>(c)]->start_final_backward();
        m.backward(slot, dloss);
        if (grad_in) to_boundary(grad_in, m.input_grad(), act_bytes);
    };
    timing_ = pipeline::run_pipeline(shape(false), data_.pp(), fn, space_);

    // Tied embeddings: the first stage's word-embedding grad and the last stage's head copy
    // both become their sum, so the two copies take identical Adam steps (Megatron's
    // allreduce of word-embedding grads over the embedding group).
    if (groups_.embedding().size() > 1) {
        model::GptModel* holder = nullptr;
        const char* name = nullptr;
        if (chunks_.front()->chunk().pre_process) {
            holder = chunks_.front();
            name = model::ParamLayout::word_embeddings();
        } else if (chunks_.back()->chunk().post_process) {
            holder = chunks_.back();
            name = model::ParamLayout::word_embeddings_for_head();
        }
        GPT_ASSERT(holder != nullptr, "rank in the embedding group holds no word embeddings");
        const auto& e = holder->layout().at(name);
        data_.embedding().all_reduce(holder->grads() + e.offset, e.numel, dist::CommType::F32,
                                       dist::ReduceOp::Sum);
    }
    loss /= static_cast<double>(num_micro_batches_);
    for (auto& r : reducers_) r->finish();
    for (auto* m : chunks_) m->reduce_sequence_parallel_grads();
    if (dp > 1) {
        groups_.dp().all_reduce(&loss, 1, dist::CommType::F64, dist::ReduceOp::Sum);
        loss /= dp;
    }
    // Megatron logs on the last stage; every rank gets the value so all take the same
    // decisions (the NaN check, skipped-iteration bookkeeping).
    return from_last_stage(loss);
}

optim::StepResult PipelineEngine::step(double lr, double loss_scale) {
    std::array<double, 2> stats{0.0, 0.0};
    for (auto* o : optimizers_) {
        const auto s = o->local_grad_stats();
        stats[0] += s[0];
        stats[1] += s[1];
    }
    auto& mp = optimizers_[0]->norm_group();
    if (mp.size() > 1) mp.all_reduce(stats.data(), 2, dist::CommType::F64, dist::ReduceOp::Sum);
    const optim::GradNorm norm = optim::AdamOptimizer::finish_grad_norm(stats, loss_scale);
    optim::StepResult r;
    for (auto* o : optimizers_) r = o->step(lr, loss_scale, norm);
    return r;
}

double PipelineEngine::evaluate(MicroBatchSource& data, int iters) {
    const pipeline::PipelineShape sh = shape(true);
    const std::size_t act_bytes =
        static_cast<std::size_t>(sh.activation_count) * dist::comm_type_size(sh.type);
    double total = 0.0;
    pipeline::StageFunctions fn;
    fn.forward = [&](int mb, int c, const void* in, void* out) {
        total += stage_forward(mb, c, take_slot(c, mb), in, out, act_bytes, false, 0);
        release_slot(c, mb);  // no backward follows: the slot is free once the output is out
    };
    fn.backward = [](int, int, const void*, void*) {
        throw InternalError("backward pass in a forward-only pipeline schedule");
    };
    for (int it = 0; it < iters; ++it) {
        read_batch(data);
        reset_slots();
        pipeline::run_pipeline(sh, data_.pp(), fn, space_);
    }
    total /= static_cast<double>(iters) * static_cast<double>(num_micro_batches_);
    const int dp = groups_.grid().dp_size();
    if (dp > 1) {
        groups_.dp().all_reduce(&total, 1, dist::CommType::F64, dist::ReduceOp::Sum);
        total /= dp;
    }
    return from_last_stage(total);
}

}  // namespace gpt::train
