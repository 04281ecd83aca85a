#include "train/monitor/run_monitor.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/errors.hpp"
#include "core/profiler.hpp"
#include "log/log.hpp"
#include "train/monitor/iteration_log.hpp"
#include "train/monitor/nan_check.hpp"
#include "train/monitor/profile_window.hpp"
#include "train/monitor/timer_log.hpp"

namespace gpt::train {

RunMonitor::RunMonitor(const Config& cfg, dist::ProcessGroups& groups, Backend& backend,
                       const model::ModelDims& dims, std::int64_t train_iters)
    : cfg_(cfg),
      groups_(groups),
      be_(backend),
      train_iters_(train_iters),
      flops_per_sample_(model_flops_per_iteration(cfg.model, dims.vocab_padded, 1)),
      seq_(static_cast<double>(dims.seq)),
      skip_watch_(cfg.training) {
    if (!cfg_.logging.metrics_file.empty() && logs())
        metrics_ = std::make_unique<MetricsFile>(cfg_.logging.metrics_file);

    // Megatron's timers (and NVTX ranges), the straggler report, the profiler window, the
    // spike guard; host names for the reports that name a rank.
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
    if (mon.check_for_spiky_loss) spikes_ = std::make_unique<SpikeGuard>(mon);
    hosts_ = gather_hostnames(groups_.world());
    // Megatron writes no TensorBoard scalars for --skip-train's evaluation.
    if (!cfg_.training.skip_train) tb_ = TensorboardLog::open(cfg_.logging, groups_.rank(), groups_.world_size());
}

RunMonitor::~RunMonitor() = default;

bool RunMonitor::logs() const {
    // Megatron prints on the last pipeline stage; here the pipeline hands the last stage's
    // loss to every stage (grad norm and LR are global anyway) and the console shows rank
    // 0's records, so rank 0 (the first stage without pipelining) logs: once, correct.
    return groups_.rank() == 0;
}

void RunMonitor::before_step(const TrainingState& state) { profile_edges(state.iteration, true); }

bool RunMonitor::spiky(double loss, const TrainingState& state, std::int64_t first_sample,
                       std::int64_t batch, const std::string& last_good_checkpoint) {
    return spikes_ && std::isfinite(loss) &&
           spikes_->skip(loss, state.iteration, first_sample, batch, last_good_checkpoint);
}

void RunMonitor::step_outcome(bool skipped, const TrainingState& state, double loss_scale) {
    if (const std::string w = skip_watch_.record(skipped, state.iteration, loss_scale); !w.empty())
        GPT_LOG(warning) << w;
}

void RunMonitor::stop_on_non_finite(bool loss_is_bad, double loss, std::int64_t iteration,
                                    ModelChunks& chunks) {
    // Collective: every rank reaches here together (the loss and the overflow flag are
    // global) and throws the same line.
    throw NumericError(loss_is_bad
                           ? non_finite_loss_report(chunks.last_local_loss(), loss, iteration, groups_, hosts_)
                           : non_finite_grad_report(chunks, iteration, groups_, hosts_));
}

void RunMonitor::after_step(const IterationRecord& rec, const TrainingState& state) {
    const int every = std::max(1, cfg_.logging.log_interval);
    interval_ms_ += rec.elapsed_ms;
    interval_samples_ += static_cast<double>(rec.global_batch);
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
        m.params_norm = rec.params_norm;
        m.num_zeros = rec.num_zeros;
        m.loss_scale = rec.loss_scale;
        m.elapsed_ms = rec.elapsed_ms;
        m.tokens_per_s = static_cast<double>(rec.global_batch) * seq_ / (rec.elapsed_ms * 1e-3);
        m.skipped = rec.skipped;
        metrics_->write(m);
    }
    if (tb_) {
        TensorboardIteration ti;
        ti.iteration = rec.iteration;
        ti.consumed_samples = state.consumed_train;
        ti.lm_loss = rec.lm_loss;
        ti.learning_rate = rec.lr;
        ti.loss_scale = rec.loss_scale;
        ti.grad_norm = rec.grad_norm;
        ti.params_norm = rec.params_norm;
        ti.num_zeros = rec.num_zeros;
        ti.skipped = rec.skipped;
        ti.batch_size = rec.global_batch;
        ti.world_size = groups_.world_size();
        tb_->iteration(ti, be_);
        if (state.iteration % every == 0) {
            const double seconds = interval_ms_ * 1e-3 / interval_iters_;
            tb_->iteration_time(state.iteration, seconds, tflops_per_gpu(interval_samples_, interval_ms_ * 1e-3));
        }
    }
    if (state.iteration % every == 0) {
        if (logs()) log_interval(rec, state);
        interval_loss_ = interval_ms_ = interval_samples_ = 0.0;  // every rank (the last one times for TensorBoard)
        interval_applied_ = interval_iters_ = interval_skipped_ = interval_nan_ = 0;
        log_timers(state.iteration);  // after the iteration line, as Megatron prints them
    }
    profile_edges(state.iteration, false);
}

void RunMonitor::evaluation(const std::string& prefix, const std::string& split, const std::string& name,
                            const TrainingState& state, double loss) {
    if (tb_) tb_->evaluation(split, name, state.iteration, state.consumed_train, loss);
    if (!logs()) return;
    GPT_LOG(info) << "\n" << format_validation_block(name.empty() ? prefix : prefix + " (" + name + ")", loss);
    if (metrics_) metrics_->write_eval(state.iteration, split, loss, name);
}

void RunMonitor::profile_edges(std::int64_t iteration, bool before_step) {
    // Megatron: start before the step when profile-step-start iterations are done, stop
    // after the one that completes profile-step-end; on the ranks of --profile-ranks.
    const ProfileEdge edge = profile_edge(cfg_.monitor, groups_.rank(), iteration, before_step);
    if (edge == ProfileEdge::Start) {
        be_.synchronize();
        profiler::start();
        GPT_LOG(info) << "profiler started before iteration " << iteration + 1;
    } else if (edge == ProfileEdge::Stop) {
        be_.synchronize();
        profiler::stop();
        GPT_LOG(info) << "profiler stopped after iteration " << iteration;
    }
}

double RunMonitor::tflops_per_gpu(double samples, double seconds) const {
    return flops_per_sample_ * samples / seconds / 1e12 / groups_.world_size();
}

void RunMonitor::log_interval(const IterationRecord& last, const TrainingState& state) {
    IntervalStats s;
    s.iteration = state.iteration;
    s.train_iters = train_iters_;
    s.consumed_samples = state.consumed_train;
    s.elapsed_ms_per_iteration = interval_ms_ / static_cast<double>(interval_iters_);
    s.tflops_per_gpu = tflops_per_gpu(interval_samples_, interval_ms_ * 1e-3);
    s.learning_rate = state.scheduler.lr();
    s.global_batch_size = last.global_batch;
    if (interval_applied_ > 0) s.lm_loss = interval_loss_ / static_cast<double>(interval_applied_);
    s.loss_scale = state.scaler.scale();
    if (!last.skipped) s.grad_norm = last.grad_norm;
    if (!std::isnan(last.params_norm)) s.params_norm = last.params_norm;
    if (last.num_zeros >= 0) s.num_zeros = last.num_zeros;
    s.skipped_iterations = interval_skipped_;
    s.nan_iterations = interval_nan_;
    GPT_LOG(info) << format_iteration_line(s);
}

void RunMonitor::log_timers(std::int64_t iteration) {
    const MonitorConfig& mon = cfg_.monitor;
    if (mon.timing_log_level == 0 && !mon.log_straggler) return;  // nothing measured
    const TimerTable t = gather_timers(*timers_, groups_.world());
    timers_->reset();
    const double per = static_cast<double>(std::max(1, cfg_.logging.log_interval));
    // Megatron's timers.write: "<name>-time", the maximum over ranks in seconds per
    // iteration, from the rank that holds the event file (the last).
    if (tb_ && cfg_.logging.log_timers_to_tensorboard) {
        for (const auto& [p, s] : timer_maxima(t, mon.timing_log_level, per))
            tb_->writer().add_scalar(std::string(phase_name(p)) + "-time", s, iteration);
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

}  // namespace gpt::train
