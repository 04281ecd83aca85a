#include "train/trainer.hpp"

#include "train/run/dataset_samples.hpp"

#include <cmath>
#include <sstream>

#include <functional>

#include "ckpt/checkpoint_dir.hpp"
#include "config/validate.hpp"
#include "core/device_info.hpp"
#include "core/errors.hpp"
#include "core/timer.hpp"
#include "core/watchdog.hpp"
#include "log/log.hpp"
#include "train/step/chunk_layout.hpp"
#include "train/run/exit_conditions.hpp"

namespace gpt::train {

void check_supported(const Config& cfg, const dist::ProcessGroups& groups) {
    pipeline_num_chunks(cfg, groups);  // layers must split evenly over (virtual) stages
    validate_precision(cfg.training);  // the flag check itself lives in config/validate
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
    } else if (backend.name() == "cuda" && cfg.parallel.distributed_backend == DistributedBackend::Nccl) {
        // NCCL refuses two ranks on one GPU with an opaque error deep in its initialisation.
        const int gpus = visible_gpu_count();
        GPT_REQUIRE(groups.local_size() <= gpus, UsageError, groups.local_size(),
                    " ranks on this node share ", gpus, " GPU(s): NCCL needs one GPU per rank. "
                    "HINT: start one rank per GPU, or use --distributed-backend mpi");
        data = std::make_unique<dist::DataGroups>(groups, Kind::Nccl, dist::DeviceCopy{}, backend.stream());
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

std::string mib(std::size_t bytes) {
    std::ostringstream os;
    os.setf(std::ios::fixed);
    os.precision(1);
    os << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
    return os.str();
}

}  // namespace

Trainer::Trainer(const Config& cfg, dist::ProcessGroups& groups, Backend& backend)
    : Trainer(derive_run(cfg, groups.grid(), groups.local_size()), groups, backend) {}

Trainer::Trainer(const RunConfig& run, dist::ProcessGroups& groups, Backend& backend)
    : cfg_(run.cfg),
      groups_(groups),
      be_(backend),
      state_(run.cfg),
      rampup_(run.cfg),
      data_start_(run.data_positions) {
    check_supported(cfg_, groups);
    // --log-progress: "Starting job" first, as Megatron writes it when the job begins.
    if (cfg_.logging.log_progress)
        progress_ = std::make_unique<ProgressLog>(cfg_.checkpoint.save, groups_.world_size(), groups_.rank() == 0);
    const auto& t = cfg_.training;
    global_batch_ = t.global_batch_size;
    num_micro_batches_ = run.num_micro_batches;
    train_iters_ = resolve_train_iters(cfg_);
    skip_on_overflow_ = t.fp16 || t.loss_scale > 0.0;

    data_ = make_data_groups(cfg_, groups, be_);
    chunks_ = std::make_unique<ModelChunks>(run, groups, *data_, be_);
    // The monitors (metrics file, timers, profiler window, spike guard, TensorBoard), after
    // the model: collective (gathers the host names).
    monitor_ = std::make_unique<RunMonitor>(cfg_, groups_, be_, chunks_->chunk(0).dims(), train_iters_);
    chunks_->set_timers(&monitor_->timers());
}

Trainer::~Trainer() = default;

MemoryReport Trainer::memory() const {
    MemoryReport r = chunks_->memory();
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
    watchdog::set_iteration(state_.iteration + 1);  // named in the hang watchdog's report
    Stopwatch sw;
    const double scale = state_.scaler.scale();
    // --rampup-batch-size, --step-batch-size-schedule: this iteration's global batch from the
    // samples consumed so far, split anew (a resumed run's position may not be one the flags'
    // schedule visits).
    const std::int64_t batch = rampup_.global_batch_at(state_.consumed_train);
    const std::int64_t micro_batches =
        batch == global_batch_
            ? num_micro_batches_
            : split_global_batch(batch, cfg_.training.micro_batch_size, groups_.grid().dp_size(),
                                 cfg_.parallel.interleaved_pp(cfg_.model.num_layers),
                                 std::string(rampup_.flag()) + ": the global batch " + std::to_string(batch) +
                                     " (from sample " + std::to_string(state_.consumed_train) + ")");
    if (rampup_.on() && batch != last_global_batch_)
        GPT_LOG(info) << (last_global_batch_ == 0 ? "setting initial batch size to " + std::to_string(batch)
                                                  : "ramping up batch size from " + std::to_string(last_global_batch_) +
                                                        " to " + std::to_string(batch));
    last_global_batch_ = batch;
    LossTally tally;
    {
        Timers::Scope phase(&monitor_->timers(), Phase::ForwardBackward);
        tally = chunks_->forward_backward(data, scale, state_.micro_batches_done, micro_batches);
    }
    state_.micro_batches_done += static_cast<std::uint64_t>(micro_batches);
    ++state_.iteration;
    // Megatron reports sum / count over the global batch, whichever way the gradient was
    // normalised.
    const double loss = mean_loss(tally, "iteration " + std::to_string(state_.iteration));
    // --calculate-per-token-loss: the gradients are sums over the global batch, divided
    // by its counted tokens with the loss scale (Megatron's finalize_model_grads).
    const double grad_divisor = cfg_.training.calculate_per_token_loss ? scale * tally.tokens : scale;
    // Megatron's NaN check. With fp16 an infinite loss is an overflow the scaler skips.
    const bool check = cfg_.monitor.check_for_nan_in_loss_and_grad();
    if (check && (std::isnan(loss) || (std::isinf(loss) && !skip_on_overflow_)))
        monitor_->stop_on_non_finite(true, loss, state_.iteration, *chunks_);

    IterationRecord rec;
    rec.iteration = state_.iteration;
    rec.lm_loss = loss;
    rec.lr = state_.scheduler.lr();
    rec.loss_scale = scale;
    rec.global_batch = batch;
    const std::int64_t first_sample = state_.consumed_train;
    state_.consumed_train += batch;
    state_.flops += monitor_->flops_per_sample() * static_cast<double>(batch);  // skipped or not, as Megatron
    if (monitor_->spiky(loss, state_, first_sample, batch, last_good_checkpoint())) {
        // No update: parameters, optimizer state, LR schedule and loss scale stay as they were.
        rec.skipped = rec.spiky = true;
        rec.grad_norm = std::nan("");
        ++state_.skipped;
    } else {
        optim::StepResult r;
        {
            Timers::Scope phase(&monitor_->timers(), Phase::Optimizer);
            r = chunks_->step(rec.lr, state_.scheduler.decoupled_lr(), state_.scheduler.weight_decay(), grad_divisor);
        }
        if (r.skipped) {
            // Without a loss scaler a non-finite gradient is no overflow: stop (the check),
            // or skip the step like an overflow (--no-check-for-nan-in-loss-and-grad).
            if (!skip_on_overflow_ && check) monitor_->stop_on_non_finite(false, loss, state_.iteration, *chunks_);
            ++state_.skipped;
        } else {
            state_.scheduler.step(batch);
        }
        state_.scaler.update(r.skipped);
        monitor_->step_outcome(r.skipped, state_, scale);
        rec.skipped = r.skipped;
        rec.grad_norm = r.skipped ? std::nan("") : r.grad.norm;
        // Megatron's optimizer returns no count for a step it skips.
        if (cfg_.logging.log_num_zeros_in_grad && !r.skipped) rec.num_zeros = r.grad.zeros;
    }
    // Megatron computes it after every step when asked, skipped or not (collective).
    rec.params_norm = cfg_.logging.log_params_norm ? chunks_->params_norm() : std::nan("");
    be_.synchronize();
    rec.elapsed_ms = sw.seconds() * 1000.0;
    history_.push_back(rec);
    return rec;
}

std::string Trainer::last_good_checkpoint() const {
    return last_good_.empty() ? "none (this run has neither saved nor loaded one)" : last_good_;
}

double Trainer::evaluate(MicroBatchSource& data, int iters) { return chunks_->evaluate(data, iters); }

void Trainer::evaluate_and_print(MicroBatchSource& data, const std::string& prefix,
                                 const std::string& split, const std::string& name) {
    const double loss = evaluate(data, cfg_.training.eval_iters);
    monitor_->evaluation(prefix, split, name, state_, loss);
}

void Trainer::evaluate_validation(const std::vector<EvalSet>& valid, const std::string& prefix) {
    for (const EvalSet& v : valid) evaluate_and_print(*v.source, prefix, "valid", v.name);
    // The validation loaders' position, which a checkpoint saves (Megatron's
    // consumed_valid_samples); the test set is read from its start each time.
    if (!valid.empty()) state_.consumed_valid += std::int64_t{cfg_.training.eval_iters} * global_batch_;
}

void Trainer::evaluate_only(const std::vector<EvalSet>& valid, MicroBatchSource* test) {
    const std::string at = "iteration " + std::to_string(state_.iteration);
    evaluate_validation(valid, at + " on validation set");
    if (test) evaluate_and_print(*test, at + " on test set", "test");
}

void Trainer::train(MicroBatchSource& train_data, MicroBatchSource* valid, MicroBatchSource* test) {
    std::vector<EvalSet> sets;
    if (valid) sets.push_back({"", valid});
    train(train_data, sets, test);
}

void Trainer::train(MicroBatchSource& train_data, const std::vector<EvalSet>& valid, MicroBatchSource* test) {
    const auto& t = cfg_.training;
    std::int64_t num_params = 0;
    for (const auto& e : chunks_->chunk(0).layout().entries()) num_params += e.numel;
    GPT_LOG(info) << " > number of parameters on (tensor, pipeline) model parallel rank ("
                  << groups_.coords().tp << ", " << groups_.coords().pp << "): " << num_params;
    GPT_LOG(info) << memory_line("after model and optimizer setup");
    ExitConditions exits(t, groups_.world());  // installs the signal handler first
    if (cfg_.sample.sample_interval > 0) sampler_ = std::make_unique<TrainingSampler>(cfg_, groups_, data_->tp(), be_, chunks_->chunk(0));
    // Every batch the schedule takes from here on splits over this layout, or the run stops
    // now rather than when the batch comes (validation could not check a run that resumes).
    rampup_.check_layout(t.micro_batch_size, groups_.grid().dp_size(),
                         cfg_.parallel.interleaved_pp(cfg_.model.num_layers), state_.consumed_train);
    start_iteration_ = state_.iteration;
    if (progress_) progress_->started(state_.flops);
    while (state_.iteration < train_iters_) {
        monitor_->before_step(state_);
        const IterationRecord rec = train_step(train_data);
        if (state_.iteration == 1) GPT_LOG(info) << memory_line("after the first iteration");
        // The iteration's logs, metrics and timer report; --profile's stop.
        monitor_->after_step(rec, state_);
        if (!valid.empty() && t.eval_interval > 0 && t.eval_iters > 0 && state_.iteration % t.eval_interval == 0)
            evaluate_validation(valid, "iteration " + std::to_string(state_.iteration));
        if (sampler_) sampler_->after_iteration(state_.iteration, chunks_->chunk(0));
        // --save-interval, and --exit-* (saved first): Megatron exits right there, without
        // the final evaluation.
        if (end_of_iteration(exits)) return;
    }
    save_at_end();
    if (t.eval_iters > 0) {
        const std::string at = "iteration " + std::to_string(state_.iteration);
        evaluate_validation(valid, at + " on validation set");
        if (test) evaluate_and_print(*test, at + " on test set", "test");
    }
}

}  // namespace gpt::train
