#include "train/trainer.hpp"

#include <cmath>
#include <sstream>

#include "core/device_info.hpp"
#include "core/errors.hpp"
#include "core/timer.hpp"
#include "log/log.hpp"
#include "train/exit_conditions.hpp"
#include "train/iteration_log.hpp"

namespace gpt::train {

void check_supported(const Config& cfg, const dist::ProcessGroups& groups) {
    pipeline_num_chunks(cfg, groups);  // layers must split evenly over (virtual) stages
    GPT_REQUIRE(!(cfg.training.fp16 && cfg.training.bf16), UsageError,
                "--fp16 and --bf16 are exclusive");
    GPT_REQUIRE(cfg.training.loss_scale == 0.0 || cfg.training.fp16 || cfg.training.bf16,
                UsageError, "--loss-scale applies to --fp16 / --bf16 training only");
    GPT_REQUIRE(cfg.model.vocab_size > 0, UsageError,
                "the vocab size is unknown: give --vocab-file/--merge-file or --vocab-size");
    GPT_REQUIRE(cfg.training.global_batch_size > 0, InternalError,
                "global batch size not resolved before training");
}

std::unique_ptr<dist::DataGroups> make_data_groups(const Config& cfg, dist::ProcessGroups& groups,
                                                   Backend& backend) {
    using Kind = dist::DataGroups::Kind;
    std::unique_ptr<dist::DataGroups> data;
    if (backend.host_memory()) {
        data = std::make_unique<dist::DataGroups>(groups, Kind::Host);
    } else if (backend.name() == "cuda" && cfg.parallel.distributed_backend == "nccl") {
        // NCCL refuses two ranks on one GPU with an opaque error deep in its initialisation.
        const int gpus = visible_gpu_count();
        GPT_REQUIRE(groups.local_size() <= gpus, UsageError, groups.local_size(),
                    " ranks on this node share ", gpus, " GPU(s): NCCL needs one GPU per rank. "
                    "HINT: start one rank per GPU, or use --distributed-backend mpi");
        data = std::make_unique<dist::DataGroups>(groups, Kind::Nccl);
    } else {
        dist::DeviceCopy copy;
        copy.to_host = [&backend](void* h, const void* d, std::size_t n) { backend.copy_to_host(h, d, n); };
        copy.to_device = [&backend](void* d, const void* h, std::size_t n) { backend.copy_to_device(d, h, n); };
        data = std::make_unique<dist::DataGroups>(groups, Kind::Staged, std::move(copy));
    }
    if (groups.world_size() > 1)
        GPT_LOG(info) << "> tensor, pipeline and data-parallel traffic: "
                      << dist::data_groups_kind_name(data->kind());
    return data;
}

namespace {

DType model_dtype(const TrainingConfig& t) {
    return t.fp16 ? DType::F16 : (t.bf16 ? DType::BF16 : DType::F32);
}

std::int64_t resolve_train_iters(const TrainingConfig& t) {
    if (t.train_iters > 0) return t.train_iters;
    GPT_REQUIRE(t.train_samples > 0, UsageError, "set --train-iters or --train-samples");
    return t.train_samples / t.global_batch_size;  // Megatron's update_train_iters (no ramp-up)
}

optim::LossScaler make_scaler(const TrainingConfig& t) {
    if (t.loss_scale > 0.0) return optim::LossScaler::constant(t.loss_scale);
    if (t.fp16)
        return optim::LossScaler::dynamic(t.initial_loss_scale, t.min_loss_scale,
                                          t.loss_scale_window, t.hysteresis);
    return optim::LossScaler::constant(1.0);
}

std::string mib(std::size_t bytes) {
    std::ostringstream os;
    os.setf(std::ios::fixed);
    os.precision(1);
    os << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
    return os.str();
}

}  // namespace

Trainer::Trainer(const Config& cfg, dist::ProcessGroups& groups, Backend& backend)
    : cfg_(cfg),
      groups_(groups),
      be_(backend),
      scheduler_(optim::LrScheduler::from_config(cfg.optimizer, cfg.training.train_iters,
                                                 cfg.training.train_samples,
                                                 cfg.training.global_batch_size)),
      scaler_(make_scaler(cfg.training)) {
    check_supported(cfg, groups);
    const auto& t = cfg.training;
    const auto c = groups.coords();
    const int dp = groups.grid().dp_size();
    global_batch_ = t.global_batch_size;
    GPT_REQUIRE(global_batch_ % (static_cast<std::int64_t>(t.micro_batch_size) * dp) == 0,
                UsageError, "--global-batch-size ", global_batch_,
                " is not a multiple of --micro-batch-size x data-parallel size (",
                t.micro_batch_size, " x ", dp, ")");
    num_micro_batches_ = global_batch_ / (static_cast<std::int64_t>(t.micro_batch_size) * dp);
    train_iters_ = resolve_train_iters(t);
    skip_on_overflow_ = t.fp16 || t.loss_scale > 0.0;

    const model::ModelDims dims = model::make_model_dims(
        cfg.model, cfg.model.vocab_size, groups.grid().tp_size(), c.tp);
    model::ModelOptions opt;
    opt.dtype = model_dtype(t);
    opt.flash_attention = cfg.parallel.use_flash_attn;
    opt.tanh_gelu = cfg.model.tanh_gelu();
    opt.hidden_dropout = static_cast<float>(cfg.model.hidden_dropout);
    opt.attention_dropout = static_cast<float>(cfg.model.attention_dropout);
    opt.layernorm_eps = static_cast<float>(cfg.model.layernorm_epsilon);
    opt.init_std = cfg.model.init_method_std;
    opt.seed = t.seed;
    opt.sequence_parallel = cfg.parallel.sequence_parallel;
    const auto& p = cfg.parallel;
    if (p.recompute_activations || p.recompute_granularity == "selective")
        opt.recompute = model::ModelOptions::Recompute::Selective;
    else if (p.recompute_granularity == "full")
        opt.recompute = model::ModelOptions::Recompute::Full;
    opt.recompute_block = p.recompute_method == "block";
    opt.recompute_num_layers = p.recompute_num_layers;
    data_ = make_data_groups(cfg, groups, be_);
    // This rank's first model chunk (the whole model without pipelining); pipeline_ builds
    // the others of an interleaved schedule.
    const model::ChunkSpec chunk = pipeline_chunk_spec(cfg, groups, 0);
    // Interleaved: the chunks share one arena of micro-batch slots, sized for the schedule.
    if (pipeline_num_chunks(cfg, groups) > 1)
        shared_ = std::make_unique<SharedActivations>(cfg, groups, be_, dims, opt,
                                                      t.micro_batch_size, num_micro_batches_);
    model_ = std::make_unique<model::GptModel>(
        dims, chunk, opt, t.micro_batch_size, be_, data_->tp(),
        pipeline_slots(cfg, groups, num_micro_batches_, 0), grad_buffer_multiple(cfg, groups),
        shared_ ? &shared_->arena(0) : nullptr);
    model_->init_parameters();
    optimizer_ = make_optimizer(cfg, groups, *data_, *model_);
    if (groups.grid().pp_size() > 1)
        pipeline_ = std::make_unique<PipelineEngine>(cfg, groups, *data_, be_, opt, num_micro_batches_,
                                                     *model_, *optimizer_, shared_.get());
    else
        reducer_ = make_grad_reducer(cfg, groups, *data_, *model_, *optimizer_);
    tokens_.resize(static_cast<std::size_t>(t.micro_batch_size) * (dims.seq + 1));
    if (!cfg.logging.metrics_file.empty() && logs())
        metrics_ = std::make_unique<MetricsFile>(cfg.logging.metrics_file);
}

Trainer::~Trainer() = default;

bool Trainer::logs() const {
    // Megatron prints on the last pipeline stage; here the pipeline hands the last stage's
    // loss to every stage (grad norm and LR are global anyway) and the console shows rank
    // 0's records, so rank 0 (the first stage without pipelining) logs: once, correct.
    return groups_.rank() == 0;
}

MemoryReport Trainer::memory() const {
    // Every model chunk of this rank: an interleaved pipeline holds several.
    MemoryReport r;
    const int chunks = pipeline_ ? pipeline_->num_chunks() : 1;
    for (int c = 0; c < chunks; ++c) {
        const model::GptModel& m = c == 0 ? *model_ : pipeline_->chunk(c);
        const optim::AdamOptimizer& o = c == 0 ? *optimizer_ : pipeline_->optimizer(c);
        const auto mm = m.memory();
        const auto om = o.memory();
        r.params += mm.params;
        r.grads += mm.grads;
        r.optimizer += om.main_params + om.moments;
        r.activations += mm.activations;
        r.buffers += mm.workspace;
    }
    if (shared_) r.activations += shared_->slot_pool_bytes();
    r.in_use = be_.bytes_in_use();
    r.peak = be_.peak_bytes();
    return r;
}

std::string Trainer::memory_line(const std::string& when) const {
    const MemoryReport m = memory();
    std::ostringstream os;
    os << "[rank " << groups_.rank() << "] memory " << when << ": parameters " << mib(m.params)
       << " | gradients " << mib(m.grads) << " | optimizer state " << mib(m.optimizer)
       << " | activations " << mib(m.activations) << " | buffers " << mib(m.buffers)
       << " | allocated " << mib(m.in_use) << " | peak " << mib(m.peak);
    return os.str();
}

IterationRecord Trainer::train_step(MicroBatchSource& data) {
    Stopwatch sw;
    const int dp = groups_.grid().dp_size(), dp_rank = groups_.coords().dp;
    const double scale = scaler_.scale();
    const double T = static_cast<double>(model_->tokens());
    // The objective is the mean token loss over the global batch, times the loss scale;
    // 1/dp is folded in here so the data-parallel reduction is a plain sum.
    const float dloss = static_cast<float>(scale / (T * static_cast<double>(num_micro_batches_) * dp));
    double loss = 0.0;
    if (pipeline_) {
        // The pipeline schedule, including the embedding and data-parallel reductions.
        loss = pipeline_->forward_backward(data, dloss, micro_batches_done_);
    } else {
        model_->zero_grads();
        for (std::int64_t mb = 0; mb < num_micro_batches_; ++mb) {
            data.next(tokens_.data());
            model_->set_batch(0, tokens_.data());
            // Streams follow the global batch order, so a run's dropout masks do not depend
            // on how the batch is split over data-parallel ranks.
            const std::uint64_t stream = (micro_batches_done_ + static_cast<std::uint64_t>(mb)) * dp + dp_rank;
            loss += model_->forward(0, true, stream) / T;
            if (mb == num_micro_batches_ - 1) reducer_->start_final_backward();
            model_->backward(0, dloss);
        }
        loss /= static_cast<double>(num_micro_batches_);
        reducer_->finish();
        // Sequence parallelism leaves each TP rank a partial sum of the layernorm and
        // row-parallel bias grads (Megatron's finalize_model_grads all-reduces them).
        model_->reduce_sequence_parallel_grads();
        if (dp > 1) {
            groups_.dp().all_reduce(&loss, 1, dist::CommType::F64, dist::ReduceOp::Sum);
            loss /= dp;
        }
    }
    micro_batches_done_ += static_cast<std::uint64_t>(num_micro_batches_);
    ++iteration_;
    GPT_REQUIRE(!std::isnan(loss), NumericError, "NaN loss at iteration ", iteration_,
                " (Megatron's NaN check). HINT: lower --lr, use --bf16, or check the data");

    IterationRecord rec;
    rec.iteration = iteration_;
    rec.lm_loss = loss;
    rec.lr = scheduler_.lr();
    rec.loss_scale = scale;
    const optim::StepResult r =
        pipeline_ ? pipeline_->step(rec.lr, scale) : optimizer_->step(rec.lr, scale);
    if (r.skipped) {
        GPT_REQUIRE(skip_on_overflow_, NumericError, "gradients are not finite at iteration ",
                    iteration_, " (loss ", loss, "). HINT: lower --lr or use --fp16 with loss scaling");
        ++total_skipped_;
    } else {
        scheduler_.step(global_batch_);
    }
    scaler_.update(r.skipped);
    if (const std::string w = skip_watch_.record(r.skipped, iteration_, scale); !w.empty())
        GPT_LOG(warning) << w;
    rec.skipped = r.skipped;
    rec.grad_norm = r.skipped ? std::nan("") : r.grad.norm;
    consumed_samples_ += global_batch_;
    be_.synchronize();
    rec.elapsed_ms = sw.seconds() * 1000.0;
    history_.push_back(rec);
    return rec;
}

double Trainer::evaluate(MicroBatchSource& data, int iters) {
    if (pipeline_) return pipeline_->evaluate(data, iters);
    const double T = static_cast<double>(model_->tokens());
    double total = 0.0;
    for (int it = 0; it < iters; ++it)
        for (std::int64_t mb = 0; mb < num_micro_batches_; ++mb) {
            data.next(tokens_.data());
            model_->set_batch(0, tokens_.data());
            total += model_->forward(0, false, 0) / T;
        }
    total /= static_cast<double>(iters) * static_cast<double>(num_micro_batches_);
    const int dp = groups_.grid().dp_size();
    if (dp > 1) {
        groups_.dp().all_reduce(&total, 1, dist::CommType::F64, dist::ReduceOp::Sum);
        total /= dp;
    }
    return total;
}

void Trainer::evaluate_and_print(MicroBatchSource& data, const std::string& prefix,
                                 const std::string& split) {
    const double loss = evaluate(data, cfg_.training.eval_iters);
    // The validation loader's position, which a checkpoint saves (Megatron's
    // consumed_valid_samples); the test set is read from its start each time.
    if (split == "valid") consumed_valid_samples_ += std::int64_t{cfg_.training.eval_iters} * global_batch_;
    if (!logs()) return;
    GPT_LOG(info) << "\n" << format_validation_block(prefix, loss);
    if (metrics_) metrics_->write_eval(iteration_, split, loss);
}

void Trainer::log_interval(const IterationRecord& last) {
    IntervalStats s;
    s.iteration = iteration_;
    s.train_iters = train_iters_;
    s.consumed_samples = consumed_samples_;
    s.elapsed_ms_per_iteration = interval_ms_ / static_cast<double>(interval_iters_);
    const double flops = model_flops_per_iteration(cfg_.model, model_->dims().vocab_padded, global_batch_);
    s.tflops_per_gpu = flops / (s.elapsed_ms_per_iteration * 1e-3) / 1e12 / groups_.world_size();
    s.learning_rate = scheduler_.lr();
    s.global_batch_size = global_batch_;
    if (interval_applied_ > 0) s.lm_loss = interval_loss_ / static_cast<double>(interval_applied_);
    s.loss_scale = scaler_.scale();
    if (!last.skipped) s.grad_norm = last.grad_norm;
    s.skipped_iterations = interval_skipped_;
    s.nan_iterations = interval_nan_;
    GPT_LOG(info) << format_iteration_line(s);
    interval_loss_ = interval_ms_ = 0.0;
    interval_applied_ = interval_iters_ = interval_skipped_ = interval_nan_ = 0;
}

void Trainer::train(MicroBatchSource& train_data, MicroBatchSource* valid, MicroBatchSource* test) {
    const auto& t = cfg_.training;
    const int every = std::max(1, cfg_.logging.log_interval);
    std::int64_t num_params = 0;
    for (const auto& e : model_->layout().entries()) num_params += e.numel;
    GPT_LOG(info) << " > number of parameters on (tensor, pipeline) model parallel rank ("
                  << groups_.coords().tp << ", " << groups_.coords().pp << "): " << num_params;
    GPT_LOG(info) << memory_line("after model and optimizer setup");
    ExitConditions exits(t, groups_.world());  // installs the signal handler first
    const double seq_tokens = static_cast<double>(global_batch_) * model_->dims().seq;
    while (iteration_ < train_iters_) {
        const IterationRecord rec = train_step(train_data);
        if (iteration_ == 1) GPT_LOG(info) << memory_line("after the first iteration");
        interval_ms_ += rec.elapsed_ms;
        ++interval_iters_;
        if (rec.skipped) {
            ++interval_skipped_;
        } else if (std::isinf(rec.lm_loss)) {
            ++interval_nan_;  // Megatron counts non-finite losses of applied steps
        } else {
            interval_loss_ += rec.lm_loss;
            ++interval_applied_;
        }
        if (metrics_) {
            IterationMetrics m;
            m.iteration = rec.iteration;
            m.lm_loss = rec.lm_loss;
            m.lr = rec.lr;
            m.grad_norm = rec.grad_norm;
            m.loss_scale = rec.loss_scale;
            m.elapsed_ms = rec.elapsed_ms;
            m.tokens_per_s = seq_tokens / (rec.elapsed_ms * 1e-3);
            m.skipped = rec.skipped;
            metrics_->write(m);
        }
        if (logs() && iteration_ % every == 0) log_interval(rec);
        if (valid && t.eval_interval > 0 && t.eval_iters > 0 && iteration_ % t.eval_interval == 0)
            evaluate_and_print(*valid, "iteration " + std::to_string(iteration_), "valid");
        // --save-interval, and --exit-* (saved first): Megatron exits right there, without
        // the final evaluation.
        if (end_of_iteration(exits)) return;
    }
    save_at_end();
    if (t.eval_iters > 0) {
        const std::string at = "iteration " + std::to_string(iteration_);
        if (valid) evaluate_and_print(*valid, at + " on validation set", "valid");
        if (test) evaluate_and_print(*test, at + " on test set", "test");
    }
}

}  // namespace gpt::train
