// The training loop of one rank: one forward-backward over the global batch and the
// mixed-precision Adam step (train::ModelChunks, whatever the pipeline size), loss scaling,
// the LR schedule, Megatron's iteration line, evaluation, the metrics file, checkpoints and
// the exit conditions.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "ckpt/checkpoint_saver.hpp"
#include "config/config.hpp"
#include "dist/process_groups.hpp"
#include "optim/loss_scaler.hpp"
#include "optim/lr_scheduler.hpp"
#include "train/step/batch_source.hpp"
#include "train/state/load_policy.hpp"
#include "train/monitor/metrics_file.hpp"
#include "train/step/model_chunks.hpp"
#include "train/run/run_config.hpp"
#include "train/monitor/skip_watch.hpp"
#include "train/monitor/train_sample.hpp"
#include "train/monitor/spike_guard.hpp"
#include "core/timers.hpp"
#include "train/monitor/tensorboard_log.hpp"

namespace gpt::train {

class ExitConditions;
struct ChunkHost;
class HostCopy;

// What one iteration did (kept for tests and the benchmark).
struct IterationRecord {
    std::int64_t iteration = 0;
    double lm_loss = 0.0;       // mean over the global batch
    double lr = 0.0;            // the learning rate this step used
    double grad_norm = 0.0;     // NaN when skipped
    double loss_scale = 1.0;    // the scale this step used
    bool skipped = false;
    bool spiky = false;         // skipped by --check-for-spiky-loss
    double elapsed_ms = 0.0;
};

// The communicators that carry this backend's memory: the MPI groups themselves on host
// memory; on a GPU NCCL (--distributed-backend nccl) or MPI through host staging (mpi).
std::unique_ptr<dist::DataGroups> make_data_groups(const Config& cfg, dist::ProcessGroups& groups,
                                                   Backend& backend);

// Rejects flags this build cannot honour yet, with a message naming them (UsageError).
void check_supported(const Config& cfg, const dist::ProcessGroups& groups);

// One validation set: `name` is "" for the single set, the prefix's file name with
// --multiple-validation-sets.
struct EvalSet {
    std::string name;
    MicroBatchSource* source = nullptr;
};

class Trainer {
public:
    // run: resolved (train::resolve_run). Builds and initialises the model, optimizer,
    // scheduler and loss scaler.
    Trainer(const RunConfig& run, dist::ProcessGroups& groups, Backend& backend);
    // cfg resolved by hand (global batch, vocab size): the run derive_run gives.
    Trainer(const Config& cfg, dist::ProcessGroups& groups, Backend& backend);
    ~Trainer();

    // Runs iterations until --train-iters (or --exit-interval / --exit-duration-in-mins).
    // valid / test may be null (no evaluation).
    void train(MicroBatchSource& train_data, MicroBatchSource* valid, MicroBatchSource* test);
    // The same with every validation set (--multiple-validation-sets: each by its name).
    void train(MicroBatchSource& train_data, const std::vector<EvalSet>& valid, MicroBatchSource* test);
    // --skip-train: Megatron's evaluation after training, at the loaded iteration, without
    // training: "validation loss at iteration N on validation set | ..." and the test set's.
    void evaluate_only(const std::vector<EvalSet>& valid, MicroBatchSource* test);
    // The TensorBoard scalars this rank writes (the last rank with --tensorboard-dir), else null.
    TensorboardLog* tensorboard() { return tb_.get(); }
    // Mean lm loss over `iters` global batches, dropout off.
    double evaluate(MicroBatchSource& data, int iters);
    // One iteration (public for tests and the benchmark).
    IterationRecord train_step(MicroBatchSource& data);
    // Checkpoints (train/trainer_checkpoint.cpp), collective. load_checkpoint: --load /
    // --ckpt-step / --load-fallback, in three steps: read what the checkpoint holds, apply
    // the run's policy (train/state/load_policy.hpp: --finetune, --no-load-optim, ...), restore;
    // the iteration loaded, nullopt for a fresh start (no --load, or an empty folder).
    // save_checkpoint: the whole training state to --save.
    std::optional<std::int64_t> load_checkpoint();
    void save_checkpoint();
    std::int64_t consumed_train_samples() const { return consumed_samples_; }
    std::int64_t consumed_valid_samples() const { return consumed_valid_samples_; }

    std::int64_t iteration() const { return iteration_; }
    std::int64_t train_iters() const { return train_iters_; }
    std::int64_t num_micro_batches() const { return num_micro_batches_; }
    const std::vector<IterationRecord>& history() const { return history_; }
    std::int64_t skipped_iterations() const { return total_skipped_; }
    // This rank's model chunks (the whole model without pipelining), their optimizers and
    // gradient reducers.
    ModelChunks& chunks() { return *chunks_; }
    const optim::LossScaler& loss_scaler() const { return scaler_; }
    MemoryReport memory() const;
    std::string memory_line(const std::string& when) const;
    // Megatron's per-phase timers of this rank (measured up to --timing-log-level).
    Timers& timers() { return *timers_; }
    // Steps --check-for-spiky-loss skipped so far in this run.
    std::int64_t spiky_iterations() const { return spikes_ ? spikes_->total() : 0; }

private:
    bool logs() const;  // this rank prints the iteration line and writes metrics
    // Every log interval with --timing-log-level > 0 or --log-straggler (collective): the
    // timer block and the straggler lines, printed by rank 0; resets the timers.
    void log_timers();
    // --check-for-spiky-loss's "last good checkpoint": saved or loaded by this run.
    std::string last_good_checkpoint() const;
    // --profile: cudaProfilerStart/Stop on rank 0 at the window's edges.
    void profile_edges(bool before_step);
    // A non-finite loss or gradient (bf16/fp32 with the check on): collective, throws.
    [[noreturn]] void stop_on_non_finite(bool loss_is_bad, double loss);
    void log_interval(const IterationRecord& last);
    void evaluate_and_print(MicroBatchSource& data, const std::string& prefix,
                            const std::string& split, const std::string& name = "");
    // Every validation set once, then the validation position advances (one round).
    void evaluate_validation(const std::vector<EvalSet>& valid, const std::string& prefix);
    // After each iteration: saves on --save-interval or before an exit; true: stop now.
    bool end_of_iteration(ExitConditions& exits);
    void save_at_end();  // after the last iteration, unless just saved
    void open_saver();   // with --save: the saver, which locks the folder (collective)
    // load_checkpoint's first and last steps (trainer_checkpoint.cpp): read what the
    // checkpoint holds (its tensors into `state`), and restore what the policy takes.
    std::optional<HeldCheckpoint> read_checkpoint(const LoadPolicy& policy, HostCopy& state);
    void restore_checkpoint(const std::vector<ChunkHost>& host, const SavedProgress& progress,
                            const std::optional<optim::LrScheduler>& schedule);

    Config cfg_;
    dist::ProcessGroups& groups_;
    Backend& be_;
    // Communicators for backend memory; declared before everything that communicates.
    std::unique_ptr<dist::DataGroups> data_;
    std::unique_ptr<ModelChunks> chunks_;
    optim::LrScheduler scheduler_;
    optim::LossScaler scaler_;
    SkipWatch skip_watch_{cfg_.training};  // fails a run that never updates (after cfg_)
    bool skip_on_overflow_ = false;  // a loss scaler is active (fp16, or --loss-scale)
    std::int64_t global_batch_ = 0, num_micro_batches_ = 0, train_iters_ = 0;
    std::int64_t iteration_ = 0, consumed_samples_ = 0;
    std::uint64_t micro_batches_done_ = 0;  // global micro-batch count: dropout streams
    std::unique_ptr<MetricsFile> metrics_;
    std::unique_ptr<Timers> timers_;
    std::unique_ptr<SpikeGuard> spikes_;  // with --check-for-spiky-loss
    std::vector<std::string> hosts_;      // every rank's host name, by world rank
    std::int64_t start_iteration_ = 0;    // where train() began (the loaded checkpoint's)
    std::unique_ptr<TensorboardLog> tb_;  // --tensorboard-dir, on the last rank
    std::vector<IterationRecord> history_;
    std::int64_t total_skipped_ = 0;
    std::int64_t consumed_valid_samples_ = 0;  // validation data position (checkpointed)
    std::int64_t last_saved_iteration_ = -1;
    std::unique_ptr<ckpt::CheckpointSaver> saver_;  // with --save; owns a save in flight
    // The host copy every save reuses (allocated at the load or the first save, kept):
    // with --async-save, and for every save on a device backend (train/state/host_copy.hpp).
    std::shared_ptr<class HostCopy> host_copy_;
    // The FP8 scaling state a save writes from (fp8_checkpoint.hpp): kept until the next save,
    // which begins only after this one's background write has finished.
    std::vector<std::vector<float>> fp8_saved_;
    std::unique_ptr<TrainingSampler> sampler_;      // with --sample-interval
    // The current logging interval.
    double interval_loss_ = 0.0, interval_ms_ = 0.0;
    std::int64_t interval_applied_ = 0, interval_iters_ = 0, interval_skipped_ = 0,
                 interval_nan_ = 0;
};

}  // namespace gpt::train
