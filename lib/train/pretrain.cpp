#include "train/pretrain.hpp"

#include "config/batch_rampup.hpp"

#include <array>
#include <optional>

#include "backend/backend.hpp"
#include "core/errors.hpp"
#include "data/gpt_dataset.hpp"
#include "data/split_datasets.hpp"
#include "log/log.hpp"
#include "train/run/dataset_samples.hpp"
#include "train/run/device_backend.hpp"
#include "train/run/exit_conditions.hpp"
#include "train/trainer.hpp"

namespace gpt::train {

namespace {

// A run whose every iteration was skipped (fp16 gradients never finite at the loss scale)
// leaves the model as initialised. Megatron exits 0 there, and so do we (a requeue would
// repeat it), but the last word of the log says so instead of "training done" alone.
void warn_if_never_updated(const Trainer& trainer, const TrainingConfig& t) {
    if (trainer.iteration() == 0 || trainer.skipped_iterations() < trainer.iteration()) return;
    GPT_LOG(warning) << "the model was never updated: all " << trainer.iteration()
                     << " iterations were skipped (gradients not finite at loss scale "
                     << trainer.loss_scaler().scale() << "): the parameters are the initial ones. "
                     << (t.loss_scale > 0
                             ? "Lower --loss-scale, or use dynamic scaling or --bf16"
                             : "The dynamic scale halves per skipped iteration from --initial-loss-scale: "
                               "train longer or start lower");
}

class LoaderSource final : public MicroBatchSource {
public:
    LoaderSource(const data::SampleDataset& ds, int mbs, int dp_rank, int dp_size,
                 std::int64_t consumed_samples)
        : loader_(ds, mbs, dp_rank, dp_size, consumed_samples) {}
    void next(std::int32_t* tokens) override { loader_.next(tokens); }

private:
    data::MicroBatchLoader loader_;
};

}  // namespace

int pretrain(const RunConfig& run, dist::ProcessGroups& groups) {
    const Config& cfg = run.cfg;
    // Catch SIGTERM/SIGUSR1 from the start, so one arriving during setup is not fatal; the
    // trainer acts on it after its next iteration.
    std::optional<SignalCatcher> signals;
    if (cfg.training.exit_signal_handler) signals.emplace();
    // --device auto: the log says which backend and why (resolve_run chose it).
    if (!run.device.auto_fallback.empty())
        GPT_LOG(info) << "> --device auto: no usable GPU (" << run.device.auto_fallback << "); using the CPU";
    const std::unique_ptr<Backend> backend = make_run_backend(run.device, groups.local_rank());
    GPT_LOG(info) << "> backend: " << backend->name();
    check_fp8_device(cfg.fp8, *backend, groups.local_rank());

    Trainer trainer(run, groups, *backend);
    trainer.load_checkpoint();  // checks it restored run.data_positions, where the loaders start
    const DataPositions& start = trainer.data_start();
    const auto& t = cfg.training;
    const std::int64_t gbs = t.global_batch_size;
    const std::int64_t iters = trainer.train_iters();
    const std::array<std::int64_t, 3> samples = dataset_samples(cfg);
    GPT_LOG(info) << "> building train, validation, and test datasets (samples: " << samples[0]
                  << ", " << samples[1] << ", " << samples[2] << ")";
    data::SplitDatasets ds = data::build_split_datasets(cfg.data, cfg.model.seq_length, t.seed,
                                                        samples, groups.world_mpi(),
                                                        static_cast<int>(cfg.model.vocab_size));
    if (cfg.data.use_mock() && (cfg.data.per_split() || !cfg.data.data_path.empty()))
        GPT_LOG(warning) << "--mock-data" << (cfg.data.mock_on_command_line ? " on the command line" : "")
                         << " wins over the data paths (as in Megatron): training on synthetic tokens, no file is read";
    else if (cfg.data.use_mock())
        GPT_LOG(info) << "> data: --mock-data (synthetic tokens); give --data-path to train on a corpus";
    const int dp = groups.grid().dp_size(), dp_rank = groups.coords().dp;
    // Every validation set starts at the checkpoint's validation position (Megatron's
    // consumed_valid_samples); the test set at its start.
    std::vector<std::unique_ptr<LoaderSource>> valid_srcs;
    std::vector<EvalSet> valid_sets;
    for (const auto& v : ds.valid) {
        valid_srcs.push_back(std::make_unique<LoaderSource>(*v.data, t.micro_batch_size, dp_rank, dp,
                                                            start.consumed_valid));
        valid_sets.push_back({v.name, valid_srcs.back().get()});
    }
    std::unique_ptr<LoaderSource> test_src;
    if (ds.test) test_src = std::make_unique<LoaderSource>(*ds.test, t.micro_batch_size, dp_rank, dp, 0);
    if (t.skip_train) {
        GPT_LOG(info) << "> --skip-train: evaluating at iteration " << trainer.iteration()
                      << " without training or saving";
        trainer.evaluate_only(valid_sets, test_src.get());
        log::flush();
        return 0;
    }
    GPT_REQUIRE(ds.train != nullptr, UsageError,
                "no training data: the --split gives train 0 (or give --train-data-path)");
    LoaderSource train_src(*ds.train, t.micro_batch_size, dp_rank, dp, start.consumed_train);

    if (const BatchRampup ramp(cfg); ramp.on())
        GPT_LOG(info) << "> training for " << iters << " iterations, " << samples[0] << " samples; " << ramp.flag()
                      << ": the global batch grows " << ramp.describe() << " (up to "
                      << trainer.num_micro_batches() << " micro-batches of " << t.micro_batch_size
                      << " per data-parallel rank)";
    else
        GPT_LOG(info) << "> training for " << iters << " iterations of " << gbs << " samples ("
                      << trainer.num_micro_batches() << " micro-batches of " << t.micro_batch_size
                      << " per data-parallel rank)";
    trainer.train(train_src, valid_sets, test_src.get());
    GPT_LOG(info) << "> training done: " << trainer.iteration() << " iterations, "
                  << trainer.skipped_iterations() << " skipped";
    warn_if_never_updated(trainer, t);
    log::flush();
    return 0;
}

}  // namespace gpt::train
