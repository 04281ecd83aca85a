#include "train/trainer.hpp"

#include "train/run/dataset_samples.hpp"

#include <cmath>
#include <sstream>

#include <functional>

#include "ckpt/checkpoint_dir.hpp"
#include "core/device_info.hpp"
#include "core/errors.hpp"
#include "core/profiler.hpp"
#include "core/timer.hpp"
#include "core/watchdog.hpp"
#include "log/log.hpp"
#include "train/step/chunk_layout.hpp"
#include "train/run/exit_conditions.hpp"
#include "train/monitor/iteration_log.hpp"
#include "train/monitor/nan_check.hpp"
#include "train/monitor/profile_window.hpp"
#include "train/monitor/timer_log.hpp"

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
    : Trainer(derive_run(cfg, groups.grid(), groups.local_size()), groups, backend) {}

Trainer::Trainer(const RunConfig& run, dist::ProcessGroups& groups, Backend& backend)
    : cfg_(run.cfg),
      groups_(groups),
      be_(backend),
      scheduler_(optim::LrScheduler::from_config(run.cfg.optimizer, run.cfg.training.train_iters,
                                                 run.cfg.training.train_samples,
                                                 run.cfg.training.global_batch_size)),
      scaler_(make_scaler(run.cfg.training)) {
    check_supported(cfg_, groups);
    const auto& t = cfg_.training;
    global_batch_ = t.global_batch_size;
    num_micro_batches_ = run.num_micro_batches;
    train_iters_ = resolve_train_iters(t);
    skip_on_overflow_ = t.fp16 || t.loss_scale > 0.0;

    data_ = make_data_groups(cfg_, groups, be_);
    chunks_ = std::make_unique<ModelChunks>(run, groups, *data_, be_);
    if (!cfg_.logging.metrics_file.empty() && logs())
        metrics_ = std::make_unique<MetricsFile>(cfg_.logging.metrics_file);

    // Monitoring: Megatron's timers (and NVTX ranges), the straggler report, the profiler
    // window, the spike guard; host names for the reports that name a rank.
    const MonitorConfig& mon = cfg_.monitor;
    GPT_REQUIRE(!mon.profile || (be_.name() == "cuda" && profiler::available()), UsageError,
                "--profile starts and stops the CUDA profiler (cudaProfilerStart/Stop), which the ",
                be_.name(), " backend of this build does not have. HINT: drop --profile; on the CPU "
                "backend profile the whole run (perf record), and read the phases with --timing-log-level 2");
    std::function<void()> sync;
    if (!be_.host_memory()) sync = [this] { be_.synchronize(); };
    timers_ = std::make_unique<Timers>(mon.timing_log_level, std::move(sync));
    if (mon.barrier_with_L1_time() && groups_.world_size() > 1)
        timers_->set_barrier([this] { groups_.world().barrier(); });
    check_profile_ranks(mon, groups_.world_size());
    if (mon.log_straggler) {
        timers_->always_measure(Phase::ForwardCompute);
        timers_->always_measure(Phase::BackwardCompute);
    }
    chunks_->set_timers(timers_.get());
    if (mon.check_for_spiky_loss) spikes_ = std::make_unique<SpikeGuard>(mon);
    hosts_ = gather_hostnames(groups_.world());
    // Megatron writes no TensorBoard scalars for --skip-train's evaluation.
    if (!cfg_.training.skip_train) tb_ = TensorboardLog::open(cfg_.logging, groups_.rank(), groups_.world_size());
}

Trainer::~Trainer() = default;

bool Trainer::logs() const {
    // Megatron prints on the last pipeline stage; here the pipeline hands the last stage's
    // loss to every stage (grad norm and LR are global anyway) and the console shows rank
    // 0's records, so rank 0 (the first stage without pipelining) logs: once, correct.
    return groups_.rank() == 0;
}

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
    watchdog::set_iteration(iteration_ + 1);  // named in the hang watchdog's report
    Stopwatch sw;
    const int dp = groups_.grid().dp_size();
    const double scale = scaler_.scale();
    const double T = static_cast<double>(chunks_->chunk(0).tokens());
    // The objective is the mean token loss over the global batch, times the loss scale;
    // 1/dp is folded in here so the data-parallel reduction is a plain sum.
    const float dloss = static_cast<float>(scale / (T * static_cast<double>(num_micro_batches_) * dp));
    double loss = 0.0;
    {
        Timers::Scope phase(timers_.get(), Phase::ForwardBackward);
        loss = chunks_->forward_backward(data, dloss, micro_batches_done_);
    }
    micro_batches_done_ += static_cast<std::uint64_t>(num_micro_batches_);
    ++iteration_;
    // Megatron's NaN check. With fp16 an infinite loss is an overflow the scaler skips.
    const bool check = cfg_.monitor.check_for_nan_in_loss_and_grad();
    if (check && (std::isnan(loss) || (std::isinf(loss) && !skip_on_overflow_))) stop_on_non_finite(true, loss);

    IterationRecord rec;
    rec.iteration = iteration_;
    rec.lm_loss = loss;
    rec.lr = scheduler_.lr();
    rec.loss_scale = scale;
    const std::int64_t first_sample = consumed_samples_;
    consumed_samples_ += global_batch_;
    if (spikes_ && std::isfinite(loss) &&
        spikes_->skip(loss, iteration_, first_sample, global_batch_, last_good_checkpoint())) {
        // No update: parameters, optimizer state, LR schedule and loss scale stay as they were.
        rec.skipped = rec.spiky = true;
        rec.grad_norm = std::nan("");
        ++total_skipped_;
    } else {
        optim::StepResult r;
        {
            Timers::Scope phase(timers_.get(), Phase::Optimizer);
            r = chunks_->step(rec.lr, scale);
        }
        if (r.skipped) {
            // Without a loss scaler a non-finite gradient is no overflow: stop (the check),
            // or skip the step like an overflow (--no-check-for-nan-in-loss-and-grad).
            if (!skip_on_overflow_ && check) stop_on_non_finite(false, loss);
            ++total_skipped_;
        } else {
            scheduler_.step(global_batch_);
        }
        scaler_.update(r.skipped);
        if (const std::string w = skip_watch_.record(r.skipped, iteration_, scale); !w.empty())
            GPT_LOG(warning) << w;
        rec.skipped = r.skipped;
        rec.grad_norm = r.skipped ? std::nan("") : r.grad.norm;
    }
    be_.synchronize();
    rec.elapsed_ms = sw.seconds() * 1000.0;
    history_.push_back(rec);
    return rec;
}

void Trainer::stop_on_non_finite(bool loss_is_bad, double loss) {
    // Collective: every rank reaches here together (the loss and the overflow flag are
    // global) and throws the same line.
    throw NumericError(loss_is_bad
                           ? non_finite_loss_report(chunks_->last_local_loss(), loss, iteration_, groups_, hosts_)
                           : non_finite_grad_report(*chunks_, iteration_, groups_, hosts_));
}

std::string Trainer::last_good_checkpoint() const {
    const auto& ck = cfg_.checkpoint;
    if (last_saved_iteration_ >= 0 && !ck.save.empty())
        return ck.save + "/" + ckpt::iteration_dir_name(last_saved_iteration_);
    if (start_iteration_ > 0 && !ck.load.empty())
        return ck.load + "/" + ckpt::iteration_dir_name(start_iteration_);
    return "none (this run has neither saved nor loaded one)";
}

void Trainer::profile_edges(bool before_step) {
    // Megatron: start before the step when profile-step-start iterations are done, stop
    // after the one that completes profile-step-end; on the ranks of --profile-ranks.
    const ProfileEdge edge = profile_edge(cfg_.monitor, groups_.rank(), iteration_, before_step);
    if (edge == ProfileEdge::Start) {
        be_.synchronize();
        profiler::start();
        GPT_LOG(info) << "profiler started before iteration " << iteration_ + 1;
    } else if (edge == ProfileEdge::Stop) {
        be_.synchronize();
        profiler::stop();
        GPT_LOG(info) << "profiler stopped after iteration " << iteration_;
    }
}

void Trainer::log_timers() {
    const MonitorConfig& mon = cfg_.monitor;
    if (mon.timing_log_level == 0 && !mon.log_straggler) return;  // nothing measured
    const TimerTable t = gather_timers(*timers_, groups_.world());
    timers_->reset();
    const double per = static_cast<double>(std::max(1, cfg_.logging.log_interval));
    // Megatron's timers.write: "<name>-time", the maximum over ranks in seconds per
    // iteration, from the rank that holds the event file (the last).
    if (tb_ && cfg_.logging.log_timers_to_tensorboard) {
        for (const auto& [p, s] : timer_maxima(t, mon.timing_log_level, per))
            tb_->writer().add_scalar(std::string(phase_name(p)) + "-time", s, iteration_);
        tb_->writer().flush();
    }
    if (!logs()) return;
    if (mon.timing_log_level > 0)
        if (const std::string block = format_timers(t, mon.timing_log_level, mon.timing_log_option, per);
            !block.empty())
            GPT_LOG(info) << block;
    if (mon.log_straggler) {
        std::vector<double> ms(static_cast<std::size_t>(t.ranks));
        for (int r = 0; r < t.ranks; ++r)
            ms[static_cast<std::size_t>(r)] =
                (t.at(r, Phase::ForwardCompute) + t.at(r, Phase::BackwardCompute)) * 1000.0 / per;
        // --straggler-minmax-count: that many of the slowest and of the fastest ranks.
        for (const std::string& line :
             straggler_report(ms, hosts_, static_cast<std::size_t>(mon.straggler_minmax_count)))
            GPT_LOG(info) << line;
    }
}

double Trainer::evaluate(MicroBatchSource& data, int iters) { return chunks_->evaluate(data, iters); }

void Trainer::evaluate_and_print(MicroBatchSource& data, const std::string& prefix,
                                 const std::string& split, const std::string& name) {
    const double loss = evaluate(data, cfg_.training.eval_iters);
    if (tb_) tb_->evaluation(split, name, iteration_, consumed_samples_, loss);
    if (!logs()) return;
    GPT_LOG(info) << "\n" << format_validation_block(name.empty() ? prefix : prefix + " (" + name + ")", loss);
    if (metrics_) metrics_->write_eval(iteration_, split, loss, name);
}

void Trainer::evaluate_validation(const std::vector<EvalSet>& valid, const std::string& prefix) {
    for (const EvalSet& v : valid) evaluate_and_print(*v.source, prefix, "valid", v.name);
    // The validation loaders' position, which a checkpoint saves (Megatron's
    // consumed_valid_samples); the test set is read from its start each time.
    if (!valid.empty()) consumed_valid_samples_ += std::int64_t{cfg_.training.eval_iters} * global_batch_;
}

void Trainer::evaluate_only(const std::vector<EvalSet>& valid, MicroBatchSource* test) {
    const std::string at = "iteration " + std::to_string(iteration_);
    evaluate_validation(valid, at + " on validation set");
    if (test) evaluate_and_print(*test, at + " on test set", "test");
}

void Trainer::log_interval(const IterationRecord& last) {
    IntervalStats s;
    s.iteration = iteration_;
    s.train_iters = train_iters_;
    s.consumed_samples = consumed_samples_;
    s.elapsed_ms_per_iteration = interval_ms_ / static_cast<double>(interval_iters_);
    const double flops = model_flops_per_iteration(cfg_.model, chunks_->chunk(0).dims().vocab_padded, global_batch_);
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
    std::vector<EvalSet> sets;
    if (valid) sets.push_back({"", valid});
    train(train_data, sets, test);
}

void Trainer::train(MicroBatchSource& train_data, const std::vector<EvalSet>& valid, MicroBatchSource* test) {
    const auto& t = cfg_.training;
    const int every = std::max(1, cfg_.logging.log_interval);
    std::int64_t num_params = 0;
    for (const auto& e : chunks_->chunk(0).layout().entries()) num_params += e.numel;
    GPT_LOG(info) << " > number of parameters on (tensor, pipeline) model parallel rank ("
                  << groups_.coords().tp << ", " << groups_.coords().pp << "): " << num_params;
    GPT_LOG(info) << memory_line("after model and optimizer setup");
    ExitConditions exits(t, groups_.world());  // installs the signal handler first
    if (cfg_.sample.sample_interval > 0) sampler_ = std::make_unique<TrainingSampler>(cfg_, groups_, data_->tp(), be_, chunks_->chunk(0));
    const double seq_tokens = static_cast<double>(global_batch_) * chunks_->chunk(0).dims().seq;
    start_iteration_ = iteration_;
    while (iteration_ < train_iters_) {
        profile_edges(true);
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
        if (tb_) {
            TensorboardIteration ti;
            ti.iteration = rec.iteration;
            ti.consumed_samples = consumed_samples_;
            ti.lm_loss = rec.lm_loss;
            ti.learning_rate = rec.lr;
            ti.loss_scale = rec.loss_scale;
            ti.grad_norm = rec.grad_norm;
            ti.skipped = rec.skipped;
            ti.batch_size = global_batch_;
            ti.world_size = groups_.world_size();
            tb_->iteration(ti, be_);
            if (iteration_ % every == 0) tb_->iteration_time(iteration_, interval_ms_ * 1e-3 / interval_iters_);
        }
        if (iteration_ % every == 0) {
            if (logs()) log_interval(rec);
            interval_loss_ = interval_ms_ = 0.0;  // every rank (the last one times for TensorBoard)
            interval_applied_ = interval_iters_ = interval_skipped_ = interval_nan_ = 0;
            log_timers();  // after the iteration line, as Megatron prints them
        }
        profile_edges(false);
        if (!valid.empty() && t.eval_interval > 0 && t.eval_iters > 0 && iteration_ % t.eval_interval == 0)
            evaluate_validation(valid, "iteration " + std::to_string(iteration_));
        if (sampler_) sampler_->after_iteration(iteration_, chunks_->chunk(0));
        // --save-interval, and --exit-* (saved first): Megatron exits right there, without
        // the final evaluation.
        if (end_of_iteration(exits)) return;
    }
    save_at_end();
    if (t.eval_iters > 0) {
        const std::string at = "iteration " + std::to_string(iteration_);
        evaluate_validation(valid, at + " on validation set");
        if (test) evaluate_and_print(*test, at + " on test set", "test");
    }
}

}  // namespace gpt::train
