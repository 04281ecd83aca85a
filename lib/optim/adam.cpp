#include "optim/adam.hpp"

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"

namespace gpt::optim {

AdamOptimizer::AdamOptimizer(const OptimizerConfig& cfg, model::GptModel& model,
                             dist::Communicator& norm_group, dist::Communicator* distributed_dp)
    : cfg_(cfg), weight_decay_(cfg.weight_decay), model_(model), be_(model.backend()), norm_(norm_group) {
    GPT_REQUIRE(cfg.clip_grad >= 0.0, UsageError, "--clip-grad must be >= 0");
    shard_size_ = model.layout().total_elements();
    if (distributed_dp && distributed_dp->size() > 1) {
        dp_ = distributed_dp;
        const std::int64_t P = model.padded_elements(), d = dp_->size();
        GPT_REQUIRE(P % d == 0, InternalError, "distributed optimizer: the model's ", P,
                    " padded elements do not split over ", d,
                    " data-parallel ranks; build the model with buffer_multiple = ", d, " x ",
                    model::ParamLayout::kAlign);
        shard_size_ = P / d;
        shard_begin_ = dp_->rank() * shard_size_;
    }
    const std::int64_t shard_end = shard_begin_ + shard_size_;
    const std::size_t bytes = static_cast<std::size_t>(shard_size_) * sizeof(float);
    if (model.options().dtype == DType::F32) {
        main_ = static_cast<float*>(model.params()) + shard_begin_;
    } else {
        main_ = static_cast<float*>(be_.alloc(bytes));
        own_main_ = true;
    }
    const int tp_rank = model.dims().tp_rank;
    // Replicated over TP: count on TP rank 0 only. The pipeline's copy of the tied
    // embedding duplicates the first stage's.
    auto counted_entry = [&](const model::ParamEntry& e) {
        return !(e.tp_duplicate && tp_rank != 0) && e.name != model::ParamLayout::word_embeddings_for_head();
    };
    // Megatron's is_embedding_or_output_parameter: the word embeddings, the output layer and
    // the last stage's copy of the tied embeddings take --decoupled-lr.
    const bool decouple = cfg.decoupled_lr != OptimizerConfig::kLrNotGiven;
    for (const auto& e : model.layout().entries()) {
        const std::int64_t end = e.offset + e.numel;
        const bool decays = e.weight_decay || (cfg.apply_wd_to_qk_layernorm && model::is_qk_norm(e));
        const bool decoupled = decouple && model::is_embedding_or_output(e);
        if (!update_ranges_.empty() && update_ranges_.back().weight_decay == decays &&
            update_ranges_.back().decoupled == decoupled)
            update_ranges_.back().end = end;
        else
            update_ranges_.push_back(Range{e.offset, end, decays, true, decoupled});
        const bool counted = counted_entry(e);
        if (!norm_ranges_.empty() && norm_ranges_.back().counted == counted)
            norm_ranges_.back().end = end;
        else
            norm_ranges_.push_back(Range{e.offset, end, false, counted});
    }
    // Keep only this rank's shard of every range (a no-op without sharding).
    for (auto* ranges : {&update_ranges_, &norm_ranges_}) {
        std::vector<Range> kept;
        for (Range r : *ranges) {
            r.begin = std::max(r.begin, shard_begin_);
            r.end = std::min(r.end, shard_end);
            if (r.begin < r.end) kept.push_back(r);
        }
        *ranges = std::move(kept);
    }
    // The counted ranges merge neighbouring entries with the padding between them.
    for (const Range& r : norm_ranges_)
        if (r.counted) counted_padding_ += r.end - r.begin;
    for (const auto& e : model.layout().entries()) {
        const std::int64_t b = std::max(e.offset, shard_begin_), x = std::min(e.offset + e.numel, shard_end);
        if (counted_entry(e) && b < x) counted_padding_ -= x - b;
    }
    exp_avg_ = static_cast<float*>(be_.alloc(bytes));
    exp_avg_sq_ = static_cast<float*>(be_.alloc(bytes));
    be_.zero(exp_avg_, bytes);
    be_.zero(exp_avg_sq_, bytes);
    reload_main_params();
}

AdamOptimizer::~AdamOptimizer() {
    be_.free(exp_avg_sq_);
    be_.free(exp_avg_);
    if (own_main_) be_.free(main_);
}

void AdamOptimizer::reload_main_params() {
    // Megatron's fp32 main param is the half model param cast up (not the pre-rounding
    // init value), so every rank and every restart agrees on it.
    if (!own_main_) return;
    const DType mdt = model_.options().dtype;
    be_.cast(static_cast<const std::byte*>(model_.params()) + shard_begin_ * dtype_size(mdt), mdt,
             main_, DType::F32, shard_size_);
}

void AdamOptimizer::publish_main_params() {
    const DType mdt = model_.options().dtype;
    if (own_main_)
        be_.cast(main_, DType::F32, static_cast<std::byte*>(model_.params()) + shard_begin_ * dtype_size(mdt),
                 mdt, shard_size_);
    gather_model_params();
}

void AdamOptimizer::gather_model_params() {
    // Every DP rank holds its updated slice of the model params at its own flat position:
    // gather the others' in place (the slices are equal and contiguous).
    if (!dp_) return;
    const DType mdt = model_.options().dtype;
    auto* params = static_cast<std::byte*>(model_.params());
    dp_->all_gather(params + shard_begin_ * dtype_size(mdt), params, shard_size_, dist::comm_type(mdt));
}

OptimizerMemory AdamOptimizer::memory() const {
    const std::size_t bytes = static_cast<std::size_t>(shard_size_) * sizeof(float);
    return OptimizerMemory{own_main_ ? bytes : 0, 2 * bytes};
}

GradStatShares AdamOptimizer::local_grad_stats() const {
    const float* g = model_.grads();
    GradStatShares local{0.0, 0.0, 0.0};
    for (const Range& r : norm_ranges_) {
        const GradStats st = be_.grad_stats(g + r.begin, r.end - r.begin);
        if (!st.finite) local[1] += 1.0;
        if (r.counted) {
            local[0] += st.sum_squares;
            local[2] += static_cast<double>(st.zeros);
        }
    }
    local[2] -= static_cast<double>(counted_padding_);
    return local;
}

double AdamOptimizer::local_param_sum_squares() const {
    double sum = 0.0;
    for (const Range& r : norm_ranges_)
        if (r.counted) sum += be_.grad_stats(main_ + (r.begin - shard_begin_), r.end - r.begin).sum_squares;
    return sum;
}

GradNorm AdamOptimizer::finish_grad_norm(const GradStatShares& reduced, double loss_scale) {
    GradNorm r;
    r.finite = reduced[1] == 0.0 && std::isfinite(reduced[0]);
    r.norm = r.finite ? std::sqrt(reduced[0]) / loss_scale : std::nan("");
    r.zeros = static_cast<std::int64_t>(reduced[2]);
    return r;
}

GradNorm AdamOptimizer::grad_norm(double loss_scale) {
    GradStatShares local = local_grad_stats();
    if (norm_.size() > 1)
        norm_.all_reduce(local.data(), static_cast<std::int64_t>(local.size()), dist::CommType::F64, dist::ReduceOp::Sum);
    return finish_grad_norm(local, loss_scale);
}

StepResult AdamOptimizer::step(double lr, double loss_scale) {
    return step(lr, loss_scale, grad_norm(loss_scale));
}

StepResult AdamOptimizer::step(double lr, double loss_scale, const GradNorm& norm) {
    StepResult r;
    r.grad = norm;
    if (!r.grad.finite) {
        r.skipped = true;
        return r;
    }
    double clip = 1.0;
    if (cfg_.clip_grad > 0.0) {
        const double coeff = cfg_.clip_grad / (r.grad.norm + 1.0e-6);
        if (coeff < 1.0) clip = coeff;
    }
    ++step_;
    const DType mdt = model_.options().dtype;
    auto* model_params = static_cast<std::byte*>(model_.params());
    {
        Timers::Scope inner(timers_, Phase::OptimizerInnerStep);
        for (const Range& e : update_ranges_) {
            const std::int64_t local = e.begin - shard_begin_;  // into the shard-sized state
            AdamArgs a;
            a.main_param = main_ + local;
            a.grad = model_.grads() + e.begin;
            a.exp_avg = exp_avg_ + local;
            a.exp_avg_sq = exp_avg_sq_ + local;
            a.model_param = own_main_ ? model_params + e.begin * dtype_size(mdt) : nullptr;
            a.model_dtype = mdt;
            a.n = e.end - e.begin;
            a.lr = static_cast<float>(e.decoupled ? decoupled_lr_ : lr);
            a.beta1 = static_cast<float>(cfg_.adam_beta1);
            a.beta2 = static_cast<float>(cfg_.adam_beta2);
            a.eps = static_cast<float>(cfg_.adam_eps);
            a.weight_decay = e.weight_decay ? static_cast<float>(weight_decay_) : 0.0f;
            a.step = step_;
            a.grad_scale = static_cast<float>(clip / loss_scale);
            be_.adam_step(a);
        }
    }
    // Only the distributed optimizer gathers; a replicated one has no such phase.
    if (!dp_) return r;
    Timers::Scope gather(timers_, Phase::ParamsAllGather);
    gather_model_params();
    return r;
}

}  // namespace gpt::optim
