#include "train/step/grad_reducer.hpp"

#include <algorithm>

#include "core/errors.hpp"

namespace gpt::train {

std::int64_t default_bucket_elements(int dp_size) {
    return std::max<std::int64_t>(40'000'000, std::int64_t{1'000'000} * dp_size);
}

std::vector<GradBucket> make_buckets(std::int64_t total, std::int64_t bucket_elements,
                                     const std::vector<std::pair<std::int64_t, std::int64_t>>& held_back) {
    GPT_ASSERT(bucket_elements > 0, "bucket size ", bucket_elements);
    std::vector<GradBucket> out;
    for (std::int64_t end = total; end > 0; end -= bucket_elements) {
        GradBucket b{std::max<std::int64_t>(0, end - bucket_elements), end, false};
        for (const auto& [lo, hi] : held_back)
            if (lo < b.end && hi > b.begin) b.held_back = true;
        out.push_back(b);
    }
    return out;
}

GradReducer::GradReducer(model::GptModel& model, dist::Communicator& dp, const Options& opt,
                         const std::vector<std::pair<std::int64_t, std::int64_t>>& held_back)
    : model_(model), dp_(dp), opt_(opt) {
    if (opt_.bucket_elements <= 0) opt_.bucket_elements = default_bucket_elements(dp.size());
    const std::int64_t total = model.padded_elements();
    if (opt_.sharded) {
        GPT_REQUIRE(opt_.shard_size * dp.size() == total &&
                        opt_.shard_begin == opt_.shard_size * dp.rank(),
                    InternalError, "distributed-optimizer shard [", opt_.shard_begin, ", +",
                    opt_.shard_size, ") does not tile the ", total, "-element grad buffer over ",
                    dp.size(), " ranks");
    }
    buckets_ = make_buckets(total, opt_.bucket_elements, held_back);
    pending_.resize(buckets_.size());
    launched_.assign(buckets_.size(), false);
    checked_.assign(buckets_.size(), false);
}

GradReducer::~GradReducer() {
    model_.set_grad_ready_hook({});
    pending_.clear();  // completes anything in flight while the model is alive
}

void GradReducer::start_final_backward() {
    std::fill(launched_.begin(), launched_.end(), false);
    std::fill(checked_.begin(), checked_.end(), false);
    first_bad_ = -1;
    launched_early_ = launched_now_ = 0;
    if (opt_.overlap && dp_.size() > 1)
        model_.set_grad_ready_hook([this](std::int64_t first_final) { on_ready(first_final); });
}

void GradReducer::on_ready(std::int64_t first_final) {
    // Buckets are ordered from the end of the buffer, the order backward finishes them.
    for (std::size_t i = 0; i < buckets_.size(); ++i) {
        if (launched_[i] || buckets_[i].held_back || buckets_[i].begin < first_final) continue;
        launch(i);
        ++launched_early_;
    }
    // MPI progresses non-blocking collectives only inside MPI calls: poke the ones in flight.
    for (auto& p : pending_)
        if (p) p->test();
}

void GradReducer::check(std::size_t i) {
    if (checked_[i]) return;
    checked_[i] = true;
    const GradBucket& b = buckets_[i];
    if (before_reduce_) before_reduce_(model_.grads(), b);
    if (!opt_.check_finite) return;
    Backend& be = model_.backend();
    // One pass over the bucket; only a bad bucket is searched parameter by parameter.
    if (be.grad_stats(model_.grads() + b.begin, b.end - b.begin).finite) return;
    for (const auto& e : model_.layout().entries()) {
        const std::int64_t lo = std::max(b.begin, e.offset), hi = std::min(b.end, e.offset + e.numel);
        if (lo >= hi || be.grad_stats(model_.grads() + lo, hi - lo).finite) continue;
        if (first_bad_ < 0 || e.offset < first_bad_) first_bad_ = e.offset;
    }
}

void GradReducer::check_held_back() {
    for (std::size_t i = 0; i < buckets_.size(); ++i)
        if (buckets_[i].held_back) check(i);
}

std::string GradReducer::local_non_finite() const {
    if (first_bad_ < 0) return "";
    for (const auto& e : model_.layout().entries())
        if (e.offset == first_bad_) return e.name;
    return "";
}

void GradReducer::launch(std::size_t i) {
    check(i);
    const GradBucket& b = buckets_[i];
    float* g = model_.grads();
    launched_[i] = true;
    if (!opt_.sharded) {
        pending_[i] = dp_.iall_reduce(g + b.begin, b.end - b.begin, dist::CommType::F32,
                                      dist::ReduceOp::Sum);
        return;
    }
    // Rank r's piece of the bucket is its intersection with r's shard.
    const int d = dp_.size();
    std::vector<std::int64_t> counts(static_cast<std::size_t>(d));
    for (int r = 0; r < d; ++r) {
        const std::int64_t lo = std::max(b.begin, opt_.shard_size * r);
        const std::int64_t hi = std::min(b.end, opt_.shard_size * (r + 1));
        counts[static_cast<std::size_t>(r)] = std::max<std::int64_t>(0, hi - lo);
    }
    // In place: this rank's piece of the bucket becomes the DP sum, the rest of the buffer
    // keeps local values the optimizer never reads (Megatron's reduce-scatter into the
    // grad buffer; no shard-sized scratch).
    const std::int64_t mine = std::clamp(b.begin, opt_.shard_begin, opt_.shard_begin + opt_.shard_size);
    pending_[i] = dp_.ireduce_scatter_v(g + b.begin, g + mine, std::move(counts),
                                        dist::CommType::F32, dist::ReduceOp::Sum);
}

void GradReducer::finish() {
    model_.set_grad_ready_hook({});
    if (dp_.size() == 1) {  // one replica: its gradients are the sum
        for (std::size_t i = 0; i < buckets_.size(); ++i) check(i);
        return;
    }
    for (std::size_t i = 0; i < buckets_.size(); ++i)
        if (!launched_[i]) {
            launch(i);
            ++launched_now_;
        }
    for (auto& p : pending_)
        if (p) {
            p->wait();
            p.reset();
        }
    std::fill(launched_.begin(), launched_.end(), false);
}

std::int64_t grad_buffer_multiple(const Config& cfg, const dist::ProcessGroups& groups) {
    if (!cfg.parallel.use_distributed_optimizer) return 1;
    return std::int64_t{groups.grid().dp_size()} * model::ParamLayout::kAlign;
}

std::unique_ptr<optim::AdamOptimizer> make_optimizer(const Config& cfg, dist::ProcessGroups& groups,
                                                     dist::DataGroups& data, model::GptModel& chunk) {
    const bool sharded = cfg.parallel.use_distributed_optimizer && groups.grid().dp_size() > 1;
    return std::make_unique<optim::AdamOptimizer>(
        cfg.optimizer, chunk, sharded ? groups.world() : groups.model_parallel(),
        sharded ? &data.dp() : nullptr);
}

std::unique_ptr<GradReducer> make_grad_reducer(const Config& cfg, dist::ProcessGroups& groups,
                                               dist::DataGroups& data, model::GptModel& chunk,
                                               const optim::AdamOptimizer& optimizer) {
    GradReducer::Options o;
    o.bucket_elements = cfg.parallel.ddp_bucket_size;
    o.overlap = cfg.parallel.overlap_grad_reduce;
    o.sharded = optimizer.distributed();
    o.shard_begin = optimizer.shard_begin();
    o.shard_size = optimizer.shard_size();
    // fp16 (or a fixed loss scale): a non-finite gradient is an overflow the scaler skips.
    o.check_finite = cfg.monitor.check_for_nan_in_loss_and_grad() && !cfg.training.fp16 &&
                     cfg.training.loss_scale <= 0.0;
    std::vector<std::pair<std::int64_t, std::int64_t>> held;
    if (groups.embedding().size() > 1 && !chunk.dims().untied_output)
        for (const char* name : {model::ParamLayout::word_embeddings(),
                                 model::ParamLayout::word_embeddings_for_head()})
            if (const auto* e = chunk.layout().find(name)) held.emplace_back(e->offset, e->offset + e->numel);
    return std::make_unique<GradReducer>(chunk, data.dp(), o, held);
}

}  // namespace gpt::train
