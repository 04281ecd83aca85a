// Everything that watches a training run, behind the two moments the trainer's loop calls it
// at: each iteration (before the step, during it for the checks that decide whether it
// updates, after it) and each evaluation. It owns the monitors: Megatron's timers and their
// report (timer_log), the TensorBoard scalars (tensorboard_log), the iteration line
// (iteration_log), the --metrics-file, the spike guard, the skip watch, the NaN check and
// the --profile window. It reads the training state, never changes it; the loop stays the
// trainer's (train/trainer.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "core/timers.hpp"
#include "dist/process_groups.hpp"
#include "model/model_spec.hpp"
#include "train/monitor/metrics_file.hpp"
#include "train/monitor/skip_watch.hpp"
#include "train/monitor/spike_guard.hpp"
#include "train/monitor/tensorboard_log.hpp"
#include "train/state/training_state.hpp"
#include "train/step/iteration_record.hpp"
#include "train/step/model_chunks.hpp"

namespace gpt::train {

class RunMonitor {
public:
    // Collective (gathers every rank's host name, for the reports that name a rank). dims:
    // the model's, for the iteration line's FLOPs and the metrics' tokens per second;
    // train_iters: the run's length, for the iteration line. UsageError for a --profile
    // this backend cannot honour, or --profile-ranks outside the world.
    RunMonitor(const Config& cfg, dist::ProcessGroups& groups, Backend& backend,
               const model::ModelDims& dims, std::int64_t train_iters);
    ~RunMonitor();

    // Megatron's per-phase timers of this rank (measured up to --timing-log-level).
    Timers& timers() { return *timers_; }
    // The TensorBoard scalars this rank writes (the last rank with --tensorboard-dir), else null.
    TensorboardLog* tensorboard() { return tb_.get(); }
    // Steps --check-for-spiky-loss skipped so far in this run.
    std::int64_t spiky_iterations() const { return spikes_ ? spikes_->total() : 0; }
    // Megatron's model FLOPs of one sequence (forward and backward), for the throughputs.
    double flops_per_sample() const { return flops_per_sample_; }
    // This rank prints the iteration line and writes the metrics.
    bool logs() const;

    // Each iteration, in the loop's order. before_step: --profile's start (state: before the step).
    void before_step(const TrainingState& state);
    // During the step, once its loss is known: true when --check-for-spiky-loss skips it
    // (a finite loss far above the recent ones); first_sample: the batch's first sample.
    bool spiky(double loss, const TrainingState& state, std::int64_t first_sample,
               std::int64_t batch, const std::string& last_good_checkpoint);
    // After the optimizer ran or skipped (fp16 overflow): the skip watch (warns; throws
    // NumericError for a run that never updates). loss_scale: the scale the step used.
    void step_outcome(bool skipped, const TrainingState& state, double loss_scale);
    // A non-finite loss or gradient (bf16/fp32 with the check on): collective, throws the
    // report that names the rank, its host and the tensor.
    [[noreturn]] void stop_on_non_finite(bool loss_is_bad, double loss, std::int64_t iteration,
                                         ModelChunks& chunks);
    // After the step (state: after it): the metrics file, the TensorBoard scalars and, every
    // --log-interval, the iteration line and the timer report; then --profile's stop.
    void after_step(const IterationRecord& rec, const TrainingState& state);

    // Each evaluation: the loss of one split ("valid", "test"; name: the validation set's
    // with --multiple-validation-sets) to TensorBoard, the console block and the metrics file.
    void evaluation(const std::string& prefix, const std::string& split, const std::string& name,
                    const TrainingState& state, double loss);

private:
    // --profile: cudaProfilerStart/Stop on the window's edges.
    void profile_edges(std::int64_t iteration, bool before_step);
    // Megatron's throughput: the model FLOPs of `samples` over `seconds`, per rank, in TFLOP/s.
    double tflops_per_gpu(double samples, double seconds) const;
    void log_interval(const IterationRecord& last, const TrainingState& state);
    // Every log interval with --timing-log-level > 0 or --log-straggler (collective): the
    // timer block and the straggler lines, printed by rank 0; resets the timers.
    void log_timers(std::int64_t iteration);

    Config cfg_;
    dist::ProcessGroups& groups_;
    Backend& be_;
    std::int64_t train_iters_ = 0;
    double flops_per_sample_ = 0.0;  // the model's, for the iteration line
    double seq_ = 0.0;               // tokens per sample, for the metrics file
    std::unique_ptr<MetricsFile> metrics_;
    std::unique_ptr<Timers> timers_;
    std::unique_ptr<SpikeGuard> spikes_;  // with --check-for-spiky-loss
    SkipWatch skip_watch_;                // fails a run that never updates
    std::vector<std::string> hosts_;      // every rank's host name, by world rank
    std::unique_ptr<TensorboardLog> tb_;  // --tensorboard-dir, on the last rank
    // The current logging interval.
    double interval_loss_ = 0.0, interval_ms_ = 0.0, interval_samples_ = 0.0;
    std::int64_t interval_applied_ = 0, interval_iters_ = 0, interval_skipped_ = 0,
                 interval_nan_ = 0;
};

}  // namespace gpt::train
