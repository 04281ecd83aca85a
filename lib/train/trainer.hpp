// The training loop of one rank, which joins lib/train's four rooms: each iteration one
// forward-backward over the global batch and the mixed-precision Adam step (train/step's
// ModelChunks, whatever the pipeline size), advancing the training state (train/state's
// TrainingState: iteration, data positions, LR schedule, loss scaler), reported to the run
// monitor (train/monitor's RunMonitor: logs, metrics, checks); evaluation, checkpoints of
// the state, and the exit conditions (train/run).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "ckpt/checkpoint_saver.hpp"
#include "config/batch_rampup.hpp"
#include "config/config.hpp"
#include "core/timers.hpp"
#include "dist/process_groups.hpp"
#include "optim/loss_scaler.hpp"
#include "train/monitor/progress_log.hpp"
#include "train/monitor/run_monitor.hpp"
#include "train/monitor/tensorboard_log.hpp"
#include "train/monitor/train_sample.hpp"
#include "train/run/run_config.hpp"
#include "train/state/load_policy.hpp"
#include "train/state/training_state.hpp"
#include "train/step/batch_source.hpp"
#include "train/step/iteration_record.hpp"
#include "train/step/model_chunks.hpp"

namespace gpt::train {

class ExitConditions;
struct ChunkHost;
class HostCopy;

// The communicators that carry this backend's memory: the MPI groups themselves on host
// memory; on a GPU NCCL (--distributed-backend nccl) or MPI through host staging (mpi).
std::unique_ptr<dist::DataGroups> make_data_groups(const Config& cfg, dist::ProcessGroups& groups,
                                                   Backend& backend);

// The Trainer's own guard for a Config that did not come through resolve_run (tests build
// them by hand): the precision flags and the pipeline split, by config/validate's checks
// (UsageError), and a resolved vocabulary and global batch. The Trainer calls it.
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
    TensorboardLog* tensorboard() { return monitor_->tensorboard(); }
    // Mean lm loss over `iters` global batches, dropout off.
    double evaluate(MicroBatchSource& data, int iters);
    // One iteration (public for tests and the benchmark).
    IterationRecord train_step(MicroBatchSource& data);
    // Checkpoints (train/trainer_checkpoint.cpp), collective. load_checkpoint: --load /
    // --ckpt-step / --load-fallback, in three steps: read what the checkpoint holds, apply
    // the run's policy (train/state/load_policy.hpp: --finetune, --no-load-optim, ...), restore;
    // the iteration loaded, nullopt for a fresh start (no --load, or an empty folder).
    // save_checkpoint: the whole training state to --save, or (NonPersistent) to the
    // non-persistent folder, which keeps only its newest (--non-persistent-save-interval).
    // The load checks that it restored the data positions the run was resolved with
    // (RunConfig::data_positions; DataError otherwise).
    std::optional<std::int64_t> load_checkpoint();
    enum class SaveKind { Persistent, NonPersistent };
    void save_checkpoint(SaveKind kind = SaveKind::Persistent);
    // Where the data loaders start: RunConfig's data positions, as the load confirmed them;
    // after --load-fallback took an older checkpoint than the one resolve_run read, that one's.
    const DataPositions& data_start() const { return data_start_; }
    std::int64_t consumed_train_samples() const { return state_.consumed_train; }
    std::int64_t consumed_valid_samples() const { return state_.consumed_valid; }

    std::int64_t iteration() const { return state_.iteration; }
    std::int64_t train_iters() const { return train_iters_; }
    // Per data-parallel rank, of the full global batch (--rampup-batch-size's last).
    std::int64_t num_micro_batches() const { return num_micro_batches_; }
    const std::vector<IterationRecord>& history() const { return history_; }
    std::int64_t skipped_iterations() const { return state_.skipped; }
    // This rank's model chunks (the whole model without pipelining), their optimizers and
    // gradient reducers.
    ModelChunks& chunks() { return *chunks_; }
    const optim::LossScaler& loss_scaler() const { return state_.scaler; }
    MemoryReport memory() const;
    std::string memory_line(const std::string& when) const;
    // Megatron's per-phase timers of this rank (measured up to --timing-log-level).
    Timers& timers() { return monitor_->timers(); }
    // Steps --check-for-spiky-loss skipped so far in this run.
    std::int64_t spiky_iterations() const { return monitor_->spiky_iterations(); }

private:
    // --check-for-spiky-loss's "last good checkpoint": saved or loaded by this run.
    std::string last_good_checkpoint() const;
    void evaluate_and_print(MicroBatchSource& data, const std::string& prefix,
                            const std::string& split, const std::string& name = "");
    // Every validation set once, then the validation position advances (one round).
    void evaluate_validation(const std::vector<EvalSet>& valid, const std::string& prefix);
    // After each iteration: saves on --save-interval or before an exit; true: stop now.
    bool end_of_iteration(ExitConditions& exits);
    void save_at_end();  // after the last iteration, unless just saved
    // With --save: the savers, which lock their folders (collective): --save's, and the
    // non-persistent folder's with --non-persistent-save-interval.
    void open_saver();
    ckpt::CheckpointSaver& saver(SaveKind kind) { return kind == SaveKind::Persistent ? *saver_ : *np_saver_; }
    // Finishes the background save in flight in either folder (collective).
    void wait_for_saves();
    // --log-progress's lines for a published save of --save's: its publication when it was
    // written in the background, and the checkpoints --keep-last removed.
    void log_published(const std::optional<ckpt::SaveResult>& r, bool async);
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
    // What a checkpoint carries: iteration, data positions, LR schedule, loss scaler, ...
    TrainingState state_;
    // Logs, metrics, TensorBoard, timers and the checks that watch each iteration.
    std::unique_ptr<RunMonitor> monitor_;
    bool skip_on_overflow_ = false;  // a loss scaler is active (fp16, or --loss-scale)
    std::int64_t global_batch_ = 0, num_micro_batches_ = 0, train_iters_ = 0;
    BatchRampup rampup_;                  // the global batch of each iteration
    std::int64_t last_global_batch_ = 0;  // the previous iteration's, for the ramp-up's log lines
    std::int64_t start_iteration_ = 0;    // where train() began (the loaded checkpoint's)
    std::string loaded_dir_;              // the folder the loaded checkpoint came from
    DataPositions data_start_;            // the run's, checked by load_checkpoint
    std::vector<IterationRecord> history_;
    std::int64_t last_saved_iteration_ = -1;        // to --save
    std::string last_good_;                         // the newest checkpoint saved or loaded: its folder
    std::unique_ptr<ckpt::CheckpointSaver> saver_;  // with --save; owns a save in flight
    // With --non-persistent-save-interval. One save is in flight at a time over both savers:
    // they share the host copy and the FP8 arrays below.
    std::unique_ptr<ckpt::CheckpointSaver> np_saver_;
    // The host copy every save reuses (allocated at the load or the first save, kept):
    // with --async-save, and for every save on a device backend (train/state/host_copy.hpp).
    std::shared_ptr<class HostCopy> host_copy_;
    // The FP8 scaling state a save writes from (fp8_checkpoint.hpp): kept until the next save,
    // which begins only after this one's background write has finished.
    std::vector<std::vector<float>> fp8_saved_;
    std::unique_ptr<TrainingSampler> sampler_;      // with --sample-interval
    std::unique_ptr<ProgressLog> progress_;         // with --log-progress
};

}  // namespace gpt::train
