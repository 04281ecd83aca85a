// Checkpoints from the trainer: exact restart (dropout on, fp16 dynamic loss scaling),
// resharding across tensor/data-parallel layouts and precisions, damaged checkpoints and
// --load-fallback, retention, and the exit conditions (signal, --exit-interval).
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ckpt/checkpoint.hpp"
#include "core/errors.hpp"
#include "core/half.hpp"
#include "h5_damage.hpp"
#include "test_env.hpp"
#include "train/run/exit_conditions.hpp"
#include "train/run/run_config.hpp"
#include "train/checkpoint_args.hpp"
#include "train/trainer.hpp"
#include "trainer_test_util.hpp"

namespace gpt::train {
namespace {

namespace fs = std::filesystem;

using test::world_rank;
using test::world_size;

struct RunResult {
    std::vector<IterationRecord> records;  // this run's iterations only
    std::vector<float> params, main;       // this rank's flat buffers after the run
    std::int64_t iteration = 0;
    double scale = 0.0;
    double eval = 0.0;                     // loss on fixed data after the run
};

// Trains `iters` iterations on the world with TP `tp` x PP `pp` (DP = world / tp / pp) after
// loading cfg.checkpoint.load (when set); saves at the end when `save`.
RunResult train_for(Config cfg, int tp, int iters, bool save, int pp = 1) {
    cfg.parallel.tensor_model_parallel_size = tp;
    cfg.parallel.pipeline_model_parallel_size = pp;
    dist::ProcessGroups groups(MPI_COMM_WORLD, tp, pp);
    auto be = make_backend("cpu", 0);
    Trainer tr(cfg, groups, *be);
    tr.load_checkpoint();
    const int dp = groups.grid().dp_size();
    test::WalkSource src(static_cast<int>(cfg.model.vocab_size), cfg.model.seq_length,
                         cfg.training.micro_batch_size, groups.coords().dp, dp,
                         tr.consumed_train_samples());
    for (int i = 0; i < iters; ++i) tr.train_step(src);
    if (save) tr.save_checkpoint();
    RunResult r;
    r.records = tr.history();
    r.iteration = tr.iteration();
    r.scale = tr.loss_scaler().scale();
    const auto n = static_cast<std::size_t>(tr.chunks().chunk(0).layout().total_elements());
    r.params.resize(n);
    tr.chunks().chunk(0).get_parameters(r.params.data());
    // This rank's optimizer range: everything, or its distributed-optimizer shard.
    r.main.assign(tr.chunks().optimizer(0).main_params(),
                  tr.chunks().optimizer(0).main_params() + tr.chunks().optimizer(0).shard_size());
    test::WalkSource fixed(static_cast<int>(cfg.model.vocab_size), cfg.model.seq_length,
                           cfg.training.micro_batch_size, groups.coords().dp, dp, 1000000);
    r.eval = tr.evaluate(fixed, 1);
    return r;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void expect_identical(const std::vector<IterationRecord>& a, const std::vector<IterationRecord>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].iteration, b[i].iteration);
        EXPECT_TRUE(same_bits(a[i].lm_loss, b[i].lm_loss)) << "iteration " << a[i].iteration << ": "
                                                           << a[i].lm_loss << " vs " << b[i].lm_loss;
        EXPECT_TRUE(same_bits(a[i].grad_norm, b[i].grad_norm) ||
                    (std::isnan(a[i].grad_norm) && std::isnan(b[i].grad_norm)))
            << "iteration " << a[i].iteration;
        EXPECT_EQ(a[i].loss_scale, b[i].loss_scale) << "iteration " << a[i].iteration;
        EXPECT_EQ(a[i].skipped, b[i].skipped) << "iteration " << a[i].iteration;
        EXPECT_EQ(a[i].lr, b[i].lr) << "iteration " << a[i].iteration;
    }
}

// N + save + load + N against the straight run of 2N: the same records, parameters, main
// parameters and loss scale, bit for bit.
void expect_restart_matches(Config cfg, int tp, int n, const RunResult& straight, const std::string& name) {
    const std::string dir = test::scratch_dir(name);
    cfg.checkpoint.save = dir;
    const RunResult first = train_for(cfg, tp, n, true);
    cfg.checkpoint.load = dir;
    const RunResult second = train_for(cfg, tp, n, false);
    EXPECT_EQ(second.iteration, 2 * n);
    std::vector<IterationRecord> joined = first.records;
    joined.insert(joined.end(), second.records.begin(), second.records.end());
    expect_identical(straight.records, joined);
    EXPECT_EQ(straight.params, second.params);
    EXPECT_EQ(straight.main, second.main);
    EXPECT_EQ(straight.scale, second.scale);
}

// 2N straight vs N + save + load + N: bit-identical, with dropout and fp16 loss scaling
// (a small initial scale and window, so steps are both skipped and applied, and the scale
// both halves and grows, around the restart).
void check_exact_restart(int tp, const std::string& name) {
    Config cfg = test::tiny::short_train();
    cfg.model.hidden_dropout = 0.1;
    cfg.model.attention_dropout = 0.1;
    cfg.training.fp16 = true;
    cfg.training.initial_loss_scale = 65536.0 * 1024.0;
    cfg.training.loss_scale_window = 3;
    cfg.training.hysteresis = 1;
    const int n = 4;
    const RunResult straight = train_for(cfg, tp, 2 * n, false);
    int skipped = 0;
    for (const auto& r : straight.records) skipped += r.skipped;
    EXPECT_GE(skipped, 1) << "no skipped step: the loss scaler state was not exercised";
    EXPECT_LT(skipped, 2 * n);

    expect_restart_matches(cfg, tp, n, straight, name);
}

TEST(Checkpointing, ExactRestartDataParallel) { check_exact_restart(1, "exact_restart_dp"); }

TEST(Checkpointing, ExactRestartTensorParallel) {
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks (TP 2)";
    check_exact_restart(2, "exact_restart_tp");
}

// Saved with one layout, loaded into another: the run continues on the same trajectory up to
// fp32 rounding (TP changes the order of sums, nothing else).
struct CkptLayout {
    int tp = 1, pp = 1;
    bool distributed_optimizer = false;
    int layers_per_virtual_stage = 0;
    void (*model)(ModelConfig&) = nullptr;  // another architecture for both runs (save's)
    PipelineSplit split = {};               // uneven stages (--decoder-first/last-pipeline-num-layers)
};

void set_split(ParallelConfig& p, const PipelineSplit& s) {
    p.decoder_first_pipeline_num_layers = s.first_stage_layers;
    p.decoder_last_pipeline_num_layers = s.last_stage_layers;
}

// A run resumed on another layout, `resumed` (n iterations), against iterations n+1..2n of
// the uninterrupted `straight` run: equal up to another layout's reduction order.
void expect_follows(const RunResult& straight, const RunResult& resumed, int n, const std::string& name) {
    ASSERT_EQ(resumed.records.size(), static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
        const auto& a = straight.records[static_cast<std::size_t>(n + i)];
        const auto& b = resumed.records[static_cast<std::size_t>(i)];
        EXPECT_EQ(a.iteration, b.iteration);
        EXPECT_NEAR(a.lm_loss, b.lm_loss, 2e-5 * a.lm_loss) << name << " iteration " << a.iteration;
        EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-4 * a.grad_norm) << name << " iteration " << a.iteration;
        EXPECT_EQ(a.lr, b.lr);
    }
    EXPECT_NEAR(straight.eval, resumed.eval, 2e-5 * straight.eval) << name;
}

void check_reshard(const CkptLayout& save, const CkptLayout& load, const std::string& name) {
    Config cfg = test::tiny::short_train();
    cfg.model.num_layers = 4;
    cfg.training.micro_batch_size = 1;  // global batch 4 splits over up to 4 DP ranks
    if (save.model) save.model(cfg.model);
    Config saving = cfg;
    saving.parallel.num_layers_per_virtual_pipeline_stage = save.layers_per_virtual_stage;
    saving.parallel.use_distributed_optimizer = save.distributed_optimizer;
    set_split(saving.parallel, save.split);
    set_split(cfg.parallel, load.split);
    cfg.parallel.num_layers_per_virtual_pipeline_stage = load.layers_per_virtual_stage;
    cfg.parallel.use_distributed_optimizer = load.distributed_optimizer;
    const int n = 3;
    const RunResult straight = train_for(saving, save.tp, 2 * n, false, save.pp);
    const std::string dir = test::scratch_dir(name);
    saving.checkpoint.save = dir;
    train_for(saving, save.tp, n, true, save.pp);
    cfg.checkpoint.load = dir;
    const RunResult resumed = train_for(cfg, load.tp, n, false, load.pp);
    expect_follows(straight, resumed, n, name);
}

void check_reshard(int tp_save, int tp_load, const std::string& name, int pp_save = 1,
                   int layers_per_virtual_stage = 0) {
    check_reshard(CkptLayout{tp_save, pp_save, false, layers_per_virtual_stage},
                  CkptLayout{tp_load, 1, false, 0}, name);
}

TEST(Checkpointing, ReshardDataParallelToTensorParallel) {
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    check_reshard(1, 2, "reshard_dp2_tp2");  // (TP1, DP2) -> (TP2, DP1)
}

TEST(Checkpointing, ReshardTensorParallelToOneRank) {
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    // (TP2, DP1) -> (TP1, DP2) on the same world; TP1 DP1 is the 1-rank run of the others.
    check_reshard(2, 1, "reshard_tp2_dp2");
}

// The Llama-style tensors (grouped QKV split by query group, SwiGLU's [2, ffn, h] fc1 split
// along ffn, the untied output layer; no biases, no position table) reshard like the rest.
TEST(Checkpointing, ReshardLlamaStyleTensorParallelToOneRank) {
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    CkptLayout save{2, 1, false, 0};
    save.model = test::tiny::llama_style;
    check_reshard(save, CkptLayout{1, 1, false, 0}, "reshard_llama_tp2_dp2");
}

// Pipeline stages are just other selections of the same tensors: (PP 2) -> (TP 2), and the
// last stage's copy of the tied embeddings is not stored twice.
TEST(Checkpointing, ReshardPipelineToTensorParallel) {
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    check_reshard(1, 2, "reshard_pp2_tp2", 2);
}

// An interleaved schedule: each stage holds 2 model chunks (virtual stages), each its own
// layout and optimizer; the tensors of all of them are saved and load anywhere.
TEST(Checkpointing, ReshardInterleavedPipelineToTensorParallel) {
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    check_reshard(1, 2, "reshard_vpp_tp2", 2, 1);
}

// Uneven stages hold the layers at their global names: layers 0 | 1-3 saved, loaded at TP 2.
TEST(Checkpointing, ReshardUnevenPipelineToTensorParallel) {
    if (world_size() != 2) GTEST_SKIP() << "needs 2 ranks";
    check_reshard({1, 2, false, 0, nullptr, {1, PipelineSplit::kNotGiven}}, {2, 1, false}, "reshard_uneven_pp2_tp2");
}

// The distributed optimizer's state is written by the DP rank owning each range, and any
// layout reads it back: sharded -> replicated, replicated -> sharded, and a bit-identical
// restart on the same sharded layout.
TEST(Checkpointing, DistributedOptimizerReshards) {
    if (world_size() != 2) GTEST_SKIP() << "needs 2 ranks";
    check_reshard({1, 1, true}, {2, 1, false}, "reshard_distopt_dp2_tp2");
    check_reshard({2, 1, false}, {1, 1, true}, "reshard_tp2_distopt_dp2");
}

TEST(Checkpointing, ExactRestartDistributedOptimizer) {
    if (world_size() != 2) GTEST_SKIP() << "needs 2 ranks";
    Config cfg = test::tiny::short_train();
    cfg.parallel.use_distributed_optimizer = true;
    cfg.training.fp16 = true;
    cfg.training.initial_loss_scale = 65536.0;
    const int n = 3;
    const RunResult straight = train_for(cfg, 1, 2 * n, false);
    const std::string dir = test::scratch_dir("exact_restart_distopt");
    cfg.checkpoint.save = dir;
    const RunResult first = train_for(cfg, 1, n, true);
    cfg.checkpoint.load = dir;
    const RunResult second = train_for(cfg, 1, n, false);
    std::vector<IterationRecord> joined = first.records;
    joined.insert(joined.end(), second.records.begin(), second.records.end());
    expect_identical(straight.records, joined);
    EXPECT_EQ(straight.params, second.params);
    EXPECT_EQ(straight.main, second.main);  // this rank's shard
}

// Issue #6's 4-rank resharding matrix, (TP, PP, DP) -> (TP, PP, DP).
TEST(Checkpointing, ReshardingMatrixOnFourRanks) {
    if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks (registered as .np4)";
    check_reshard({2, 2, false}, {1, 1, false}, "reshard_221_114");
    check_reshard({1, 2, true}, {2, 1, false}, "reshard_122_distopt_212");
    check_reshard({1, 1, false}, {4, 1, false}, "reshard_114_411");
    check_reshard({1, 1, true}, {1, 2, true, 1}, "reshard_114_distopt_122_interleaved_distopt");
    // Stages of 3 | 1 layers resumed as 1 | 3: every layer changes rank.
    check_reshard({1, 2, true, 0, nullptr, {3, 1}}, {2, 2, false, 0, nullptr, {1, 3}}, "reshard_uneven_31_distopt_13");
}

// `cfg` trained `iters` iterations at TP 1 and saved into the scratch folder `name`; returned
// with --load on that folder (and no --save).
Config loading_after(int iters, const std::string& name, Config cfg = test::tiny::short_train()) {
    const std::string dir = test::scratch_dir(name);
    cfg.checkpoint.save = dir;
    train_for(cfg, 1, iters, true);
    cfg.checkpoint.save.clear();
    cfg.checkpoint.load = dir;
    return cfg;
}

// A trainer built without resolve_run (no look at the checkpoint first) whose padding
// differs from the checkpoint's: refused at load, with the fix.
TEST(Checkpointing, DifferentVocabPaddingIsRefused) {
    Config cfg = loading_after(1, "vocab_padding");
    cfg.model.make_vocab_size_divisible_by = 128;  // 64 rows saved, 128 now
    EXPECT_THROW(train_for(cfg, 1, 0, false), UsageError);
}

// --load adopts the checkpoint's padded vocabulary when the new TP size divides it (issue
// #19): saved at TP 1 with --make-vocab-size-divisible-by 64 (61 -> 64 rows), resumed at TP
// `tp` with the same flag, which alone would pad to 64 x tp rows. The resumed run trains on
// and follows the straight TP 1 run as any reshard does.
void check_adopted_vocab(int tp, const std::string& name) {
    Config cfg = test::tiny::short_train();
    cfg.training.micro_batch_size = 1;  // global batch 4 splits over up to 4 DP ranks
    cfg.model.make_vocab_size_divisible_by = 64;
    const int n = 3;
    const RunResult straight = train_for(cfg, 1, 2 * n, false);
    const std::string dir = test::scratch_dir(name);
    Config saving = cfg;
    saving.checkpoint.save = dir;
    train_for(saving, 1, n, true);
    cfg.checkpoint.load = dir;
    cfg.parallel.tensor_model_parallel_size = tp;
    cfg.parallel.tp_given = true;
    const RunConfig run = resolve_run(cfg, world_size(), 1);
    EXPECT_EQ(run.padded_vocab_size, 64);
    EXPECT_EQ(run.cfg.model.make_vocab_size_divisible_by, 64 / tp);
    const RunResult resumed = train_for(run.cfg, tp, n, false);
    expect_follows(straight, resumed, n, name);
    // A fresh run (no checkpoint in --load) keeps Megatron's padding.
    Config fresh = cfg;
    fresh.checkpoint.load = test::scratch_dir(name + "_empty");
    EXPECT_EQ(resolve_run(fresh, world_size(), 1).padded_vocab_size, 64 * tp);
}

TEST(Checkpointing, LoadAdoptsTheCheckpointsPaddedVocabulary) {
    if (world_size() != 2) GTEST_SKIP() << "needs 2 ranks (TP 2)";
    check_adopted_vocab(2, "adopt_vocab_tp2");
}

TEST(Checkpointing, LoadAdoptsThePaddedVocabularyOnFourRanks) {
    if (world_size() != 4) GTEST_SKIP() << "needs 4 ranks (registered as .np4)";
    check_adopted_vocab(4, "adopt_vocab_tp4");
}

// --use-checkpoint-args (Megatron's load_args_from_checkpoint): a run given none of the
// model's flags takes them (a Llama-style architecture's among them) from the checkpoint it
// resumes and follows the straight run; a contradicting flag is refused naming both values;
// an empty --load keeps the given flags.
TEST(Checkpointing, UseCheckpointArgsTakesTheModelFromTheCheckpoint) {
    Config cfg = test::tiny::short_train();
    test::tiny::llama_style(cfg.model);
    cfg.model.num_layers = 3;
    const int n = 2;
    const RunResult straight = train_for(cfg, 1, 2 * n, false);
    const Config loading = loading_after(n, "use_checkpoint_args", cfg);
    Config bare = loading;
    bare.model = ModelConfig{};  // none of the model's flags given
    bare.checkpoint.use_checkpoint_args = true;
    const std::string line = take_args_from_checkpoint(bare);
    EXPECT_NE(line.find("num_layers 3"), std::string::npos) << line;
    EXPECT_NE(line.find("swiglu True"), std::string::npos) << line;
    EXPECT_EQ(bare.model.num_layers, 3);
    EXPECT_EQ(bare.model.hidden_size, cfg.model.hidden_size);
    EXPECT_EQ(bare.model.seq_length, cfg.model.seq_length);
    EXPECT_EQ(bare.model.vocab_size, cfg.model.vocab_size);
    EXPECT_EQ(bare.model.normalization, Normalization::RMSNorm);
    EXPECT_EQ(bare.model.num_query_groups, cfg.model.num_query_groups);
    EXPECT_EQ(bare.model.hidden_dropout, cfg.model.hidden_dropout);
    const RunResult resumed = train_for(resolve_run(bare, world_size(), 1).cfg, 1, n, false);
    expect_follows(straight, resumed, n, "use_checkpoint_args");

    Config wrong = loading;
    wrong.model.hidden_size = 2 * cfg.model.hidden_size;
    wrong.given_keys = {"hidden_size"};
    wrong.checkpoint.use_checkpoint_args = true;
    try {
        take_args_from_checkpoint(wrong);
        ADD_FAILURE() << "a contradicting --hidden-size was accepted";
    } catch (const UsageError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("--hidden-size: " + std::to_string(cfg.model.hidden_size) + " in the checkpoint "),
                  std::string::npos) << m;
        EXPECT_NE(m.find(std::to_string(2 * cfg.model.hidden_size) + " given"), std::string::npos) << m;
    }
    Config fresh = bare;
    fresh.checkpoint.load = test::scratch_dir("use_checkpoint_args_empty");
    EXPECT_NE(take_args_from_checkpoint(fresh).find("so the given flags stand"), std::string::npos);
}

// Saved rows that the new TP size does not divide: one line naming both numbers. The look
// at the checkpoint needs no other rank, so any world resolves a TP 2 run of 2 ranks.
TEST(Checkpointing, PaddedVocabularyTheTpSizeDoesNotDivideIsRefused) {
    Config odd = test::tiny::short_train();
    odd.model.make_vocab_size_divisible_by = 1;  // 61 rows, odd
    odd.training.micro_batch_size = 1;           // global batch 4 splits over up to 4 DP ranks
    Config cfg = loading_after(1, "adopt_vocab_odd", odd);
    cfg.parallel.tensor_model_parallel_size = 2;
    cfg.parallel.tp_given = true;
    try {
        resolve_run(cfg, 2, 1);
        ADD_FAILURE() << "a padded vocabulary of 61 rows was accepted at TP 2";
    } catch (const UsageError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("padded vocabulary of 61 rows"), std::string::npos) << what;
        EXPECT_NE(what.find("--tensor-model-parallel-size 2 does not divide"), std::string::npos) << what;
    }
}

// The data positions are resolved with the run (issue #35): resolve_run reads them from the
// checkpoint --load names, the load restores the same, and the loaders start there;
// --finetune starts at 0 without reading them.
TEST(Checkpointing, DataPositionsAreResolvedFromTheCheckpoint) {
    const Config cfg = loading_after(3, "data_positions");
    const RunConfig run = resolve_run(cfg, world_size(), 1);
    EXPECT_EQ(run.data_positions.consumed_train, 3 * cfg.training.global_batch_size);
    EXPECT_EQ(run.data_positions.consumed_valid, 0);
    EXPECT_EQ(run.data_positions.checkpoint_iteration, std::optional<std::int64_t>(3));
    dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
    auto be = make_backend("cpu", 0);
    Trainer tr(run, groups, *be);
    tr.load_checkpoint();
    EXPECT_EQ(tr.data_start(), run.data_positions);
    EXPECT_EQ(tr.consumed_train_samples(), run.data_positions.consumed_train);
    Config ft = cfg;
    ft.checkpoint.finetune = true;
    EXPECT_EQ(resolve_run(ft, world_size(), 1).data_positions, DataPositions{});
}

// A load that restores other positions than the run was resolved with (the folder changed
// after resolve_run looked) is refused, naming both numbers.
TEST(Checkpointing, RestoredDataPositionsOtherThanTheResolvedAreRefused) {
    const Config cfg = loading_after(2, "data_positions_changed");
    RunConfig run = resolve_run(cfg, world_size(), 1);
    const std::int64_t saved = run.data_positions.consumed_train;
    run.data_positions.consumed_train = saved + 1;
    dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
    auto be = make_backend("cpu", 0);
    Trainer tr(run, groups, *be);
    try {
        tr.load_checkpoint();
        ADD_FAILURE() << "positions " << saved << " restored where " << saved + 1 << " were resolved";
    } catch (const DataError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("data positions " + std::to_string(saved) + " (training)"), std::string::npos) << what;
        EXPECT_NE(what.find("resolved with " + std::to_string(saved + 1)), std::string::npos) << what;
    }
}

// --load-fallback past a damaged newest checkpoint loads an older one than resolve_run read:
// the loaders start at that one's positions (what the run did before they were resolved).
TEST(Checkpointing, FallbackToAnOlderCheckpointStartsAtItsPositions) {
    const DataPositions resolved{40, 8, 5};
    EXPECT_EQ(checked_positions(resolved, 5, 40, 8), resolved);
    EXPECT_EQ(checked_positions(resolved, 3, 24, 0), (DataPositions{24, 0, 3}));
    EXPECT_THROW(checked_positions(resolved, 5, 24, 8), DataError);
    EXPECT_THROW(checked_positions(resolved, std::nullopt, 0, 0), DataError);
    EXPECT_EQ(checked_positions(DataPositions{}, std::nullopt, 0, 0), DataPositions{});
}

// fp16 -> fp32 and bf16: the fp32 main params carry over bit for bit, the bf16 model params
// are their rounding, and the run continues close to the fp16 one.
TEST(Checkpointing, PrecisionChangeOnLoad) {
    Config cfg = test::tiny::short_train();
    cfg.training.fp16 = true;
    cfg.training.loss_scale = 1024.0;
    const std::string dir = test::scratch_dir("precision");
    cfg.checkpoint.save = dir;
    const RunResult saved = train_for(cfg, 1, 3, true);
    cfg.checkpoint.save.clear();
    cfg.checkpoint.load = dir;
    const RunResult fp16 = train_for(cfg, 1, 1, false);
    for (const bool bf16 : {false, true}) {
        Config c = cfg;
        c.training.fp16 = false;
        c.training.bf16 = bf16;
        c.training.loss_scale = 0.0;
        const RunResult r = train_for(c, 1, 0, false);
        EXPECT_EQ(r.iteration, 3);
        EXPECT_EQ(r.main, saved.main) << (bf16 ? "bf16" : "fp32");
        for (std::size_t i = 0; i < r.params.size(); ++i) {
            const float want = bf16 ? bf16_bits_to_float(float_to_bf16_bits(saved.main[i])) : saved.main[i];
            ASSERT_EQ(r.params[i], want) << "element " << i << (bf16 ? " bf16" : " fp32");
        }
        const RunResult next = train_for(c, 1, 1, false);
        EXPECT_EQ(next.records.at(0).iteration, 4);
        EXPECT_NEAR(next.records[0].lm_loss, fp16.records.at(0).lm_loss, 2e-2 * fp16.records[0].lm_loss);
    }
}

// FP8 (issue 34): delayed scaling's amax histories and scales travel in the checkpoint, so a
// resumed run's scales, hence its FP8 codes, are the straight run's: bit-identical. A
// history longer than one step with the max algorithm makes the restored history matter
// beyond the last step's amaxes.
Config fp8_config() {
    Config cfg = test::tiny::short_train();
    cfg.training.bf16 = true;
    cfg.fp8.fp8_format = Fp8Scheme::Hybrid;
    cfg.fp8.fp8_recipe = Fp8Recipe::Delayed;
    cfg.fp8.fp8_amax_history_len = 3;
    cfg.fp8.fp8_amax_compute_algo = AmaxAlgo::Max;
    return cfg;
}

void check_fp8_exact_restart(int tp, const std::string& name) {
    Config cfg = fp8_config();
    const int n = 4;
    expect_restart_matches(cfg, tp, n, train_for(cfg, tp, 2 * n, false), name);
}

TEST(Checkpointing, Fp8ExactRestart) { check_fp8_exact_restart(1, "fp8_exact_restart"); }

TEST(Checkpointing, Fp8ExactRestartTensorParallel) {
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks (TP 2)";
    check_fp8_exact_restart(2, "fp8_exact_restart_tp");
}

// A bf16 checkpoint continues in FP8 (scaling starts afresh) and an FP8 one in bf16 (its
// scaling state ignored): both load every parameter exactly and train on.
TEST(Checkpointing, Fp8AndBf16CheckpointsLoadIntoEachOther) {
    Config fp8 = fp8_config();
    Config bf16 = fp8;
    bf16.fp8 = Fp8Config{};
    for (const bool from_fp8 : {false, true}) {
        Config save = from_fp8 ? fp8 : bf16, load = from_fp8 ? bf16 : fp8;
        const std::string dir = test::scratch_dir(from_fp8 ? "fp8_to_bf16" : "bf16_to_fp8");
        save.checkpoint.save = dir;
        const RunResult saved = train_for(save, 1, 3, true);
        load.checkpoint.load = dir;
        const RunResult r = train_for(load, 1, 2, false);
        EXPECT_EQ(r.records.at(0).iteration, 4) << (from_fp8 ? "FP8 -> bf16" : "bf16 -> FP8");
        EXPECT_TRUE(std::isfinite(r.records.back().lm_loss));
        EXPECT_LT(r.records.back().lm_loss, saved.records.front().lm_loss);
    }
}

void flip_dataset_byte(const std::string& file, const char* dataset) {
    if (world_rank() == 0) test::flip_dataset_bits(file, dataset, 40, 0x10);
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST(Checkpointing, DamagedCheckpointIsRejectedAndFallbackLoadsThePreviousOne) {
    Config cfg = test::tiny::short_train();
    const std::string dir = test::scratch_dir("damaged");
    cfg.checkpoint.save = dir;
    const RunResult at2 = train_for(cfg, 1, 2, true);
    cfg.checkpoint.load = dir;
    train_for(cfg, 1, 2, true);  // iteration 4
    flip_dataset_byte(ckpt::checkpoint_file(dir, 4).string(),
                      "optimizer/exp_avg/language_model/embedding/word_embeddings/weight");
    cfg.checkpoint.save.clear();
    EXPECT_THROW(train_for(cfg, 1, 0, false), DataError);
    cfg.checkpoint.load_fallback = true;
    const RunResult fell_back = train_for(cfg, 1, 0, false);
    EXPECT_EQ(fell_back.iteration, 2);
    EXPECT_EQ(fell_back.main, at2.main);
    // --ckpt-step picks an older one explicitly.
    cfg.checkpoint.load_fallback = false;
    cfg.checkpoint.ckpt_step = 2;
    EXPECT_EQ(train_for(cfg, 1, 0, false).iteration, 2);
}

TEST(Checkpointing, EmptyLoadFolderIsAFreshStartAndKeepLastRetains) {
    Config cfg = test::tiny::short_train();
    const std::string dir = test::scratch_dir("fresh_keep");
    cfg.checkpoint.save = dir;
    cfg.checkpoint.load = dir;
    cfg.checkpoint.keep_last = 2;
    cfg.checkpoint.exit_on_missing_checkpoint = true;  // Megatron's: no fresh start
    EXPECT_THROW(train_for(cfg, 1, 1, true), IoError);
    cfg.checkpoint.exit_on_missing_checkpoint = false;
    for (int i = 0; i < 3; ++i) EXPECT_EQ(train_for(cfg, 1, 1, true).iteration, i + 1);
    EXPECT_EQ(ckpt::list_iterations(dir), (std::vector<std::int64_t>{2, 3}));
    // Loading 3 and saving at once does not write iteration 3 again.
    const auto stamp = fs::last_write_time(ckpt::checkpoint_file(dir, 3));
    train_for(cfg, 1, 0, true);
    EXPECT_EQ(fs::last_write_time(ckpt::checkpoint_file(dir, 3)), stamp);
    EXPECT_EQ(ckpt::read_tracker(dir), 3);
}

// Raises SIGUSR1 on rank 0 while it reads micro-batch `at` (a real signal, handled by the
// --exit-signal-handler handler); the other ranks learn of it through the all-reduce.
class SignallingSource final : public MicroBatchSource {
public:
    SignallingSource(test::WalkSource inner, int at) : inner_(std::move(inner)), at_(at) {}
    void next(std::int32_t* tokens) override {
        if (count_++ == at_ && world_rank() == 0) std::raise(SIGUSR1);
        inner_.next(tokens);
    }

private:
    test::WalkSource inner_;
    int at_, count_ = 0;
};

struct TrainRun {
    std::vector<IterationRecord> records;
    std::int64_t iteration = 0;
};

TrainRun run_train(const Config& cfg, int signal_at) {
    dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
    auto be = make_backend("cpu", 0);
    Trainer tr(cfg, groups, *be);
    tr.load_checkpoint();
    const int dp = groups.grid().dp_size();
    SignallingSource src(test::WalkSource(static_cast<int>(cfg.model.vocab_size), cfg.model.seq_length,
                                          cfg.training.micro_batch_size, groups.coords().dp, dp,
                                          tr.consumed_train_samples()),
                         signal_at);
    tr.train(src, nullptr, nullptr);
    return {tr.history(), tr.iteration()};
}

TEST(Checkpointing, SignalSavesAndExitsThenTheRunResumesExactly) {
    Config cfg = test::tiny::short_train();
    cfg.model.hidden_dropout = 0.1;
    const TrainRun straight = run_train(cfg, -1);
    ASSERT_EQ(straight.iteration, 8);
    const std::string dir = test::scratch_dir("signal");
    cfg.checkpoint.save = dir;
    cfg.checkpoint.load = dir;
    cfg.training.exit_signal_handler = true;
    struct sigaction before {};
    sigaction(SIGUSR1, nullptr, &before);
    SignalCatcher::clear();
    // Micro-batch 5 of rank 0 belongs to iteration 3 (2 per iteration on 1 rank, 1 on 2).
    const TrainRun stopped = run_train(cfg, 5);
    const std::int64_t want = world_size() == 1 ? 3 : 6;
    EXPECT_EQ(stopped.iteration, want);
    EXPECT_EQ(ckpt::read_tracker(dir), want);
    SignalCatcher::clear();
    const TrainRun resumed = run_train(cfg, -1);
    EXPECT_EQ(resumed.iteration, 8);
    std::vector<IterationRecord> joined = stopped.records;
    joined.insert(joined.end(), resumed.records.begin(), resumed.records.end());
    expect_identical(straight.records, joined);
    EXPECT_EQ(ckpt::read_tracker(dir), 8);  // saved at the end of training
    // The handler is gone after training: SIGUSR1 has its previous meaning again.
    struct sigaction now {};
    sigaction(SIGUSR1, nullptr, &now);
    EXPECT_EQ(now.sa_handler, before.sa_handler);
}

// Throws on every rank at the first micro-batch of iteration `at` (counted from the run's
// start): a crash, with no save at the exit.
class CrashingSource final : public MicroBatchSource {
public:
    CrashingSource(test::WalkSource inner, std::int64_t at) : inner_(std::move(inner)), at_(at) {}
    void next(std::int32_t* tokens) override {
        if (count_++ == at_) throw std::runtime_error("the node died");
        inner_.next(tokens);
    }

private:
    test::WalkSource inner_;
    std::int64_t at_, count_ = 0;
};

// Trains until a crash at the start of iteration `crash_at` (none: to the end).
TrainRun run_until(const Config& cfg, std::int64_t crash_at) {
    dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
    auto be = make_backend("cpu", 0);
    Trainer tr(cfg, groups, *be);
    tr.load_checkpoint();
    const std::int64_t at = crash_at > 0 ? (crash_at - 1 - tr.iteration()) * tr.num_micro_batches() : -1;
    CrashingSource src(test::WalkSource(static_cast<int>(cfg.model.vocab_size), cfg.model.seq_length,
                                        cfg.training.micro_batch_size, groups.coords().dp,
                                        groups.grid().dp_size(), tr.consumed_train_samples()),
                       at);
    if (crash_at > 0) EXPECT_THROW(tr.train(src, nullptr, nullptr), std::runtime_error);
    else tr.train(src, nullptr, nullptr);
    return {tr.history(), tr.iteration()};
}

// Megatron's --non-persistent-save-interval with --non-persistent-ckpt-type global: saves
// between the persistent ones to a folder that keeps only its newest; after a crash the run
// resumes from it when it is newer than --load's newest, exactly; --ckpt-step and a newer
// persistent checkpoint win; a damaged one falls back to --load's with --load-fallback.
TEST(Checkpointing, NonPersistentCheckpointsKeepTheNewestAndAResumeTakesIt) {
    Config cfg = test::tiny::short_train();  // 8 iterations
    cfg.model.hidden_dropout = 0.1;
    const TrainRun straight = run_until(cfg, -1);
    ASSERT_EQ(straight.iteration, 8);
    const std::string dir = test::scratch_dir("non_persistent");
    const std::string transient = dir + "/non_persistent";
    CheckpointConfig& ck = cfg.checkpoint;
    ck.save = ck.load = dir;
    ck.save_interval = 4;
    ck.non_persistent_save_interval = 3;
    ck.non_persistent_ckpt_type = "global";
    const TrainRun crashed = run_until(cfg, 8);
    EXPECT_EQ(crashed.iteration, 7);
    EXPECT_EQ(ckpt::list_iterations(dir), (std::vector<std::int64_t>{4}));
    EXPECT_EQ(ckpt::list_iterations(transient), (std::vector<std::int64_t>{6}));  // 3 removed

    Config load_only = cfg;
    load_only.checkpoint.save.clear();
    load_only.checkpoint.ckpt_step = 4;  // names one of --load's
    EXPECT_EQ(train_for(load_only, 1, 0, false).iteration, 4);
    load_only.checkpoint.ckpt_step = -1;
    const char* moment = "optimizer/exp_avg/language_model/embedding/word_embeddings/weight";
    flip_dataset_byte(ckpt::checkpoint_file(transient, 6).string(), moment);
    EXPECT_THROW(train_for(load_only, 1, 0, false), DataError);
    load_only.checkpoint.load_fallback = true;
    EXPECT_EQ(train_for(load_only, 1, 0, false).iteration, 4);
    flip_dataset_byte(ckpt::checkpoint_file(transient, 6).string(), moment);  // repaired

    const TrainRun resumed = run_until(cfg, -1);
    EXPECT_EQ(resumed.iteration, 8);
    std::vector<IterationRecord> joined = crashed.records;
    joined.erase(joined.begin() + 6, joined.end());  // iteration 7 was lost with the crash
    joined.insert(joined.end(), resumed.records.begin(), resumed.records.end());
    expect_identical(straight.records, joined);
    EXPECT_EQ(ckpt::list_iterations(dir), (std::vector<std::int64_t>{4, 8}));
    EXPECT_EQ(ckpt::list_iterations(transient), (std::vector<std::int64_t>{6}));
    load_only.checkpoint.load_fallback = false;
    EXPECT_EQ(train_for(load_only, 1, 0, false).iteration, 8);  // --load's is newer now

    // A folder of their own, with --async-save: one save in flight at a time over both.
    Config other = test::tiny::short_train();
    const std::string dir2 = test::scratch_dir("non_persistent_async");
    const std::string own = test::scratch_dir("non_persistent_own");
    other.checkpoint = ck;
    other.checkpoint.save = other.checkpoint.load = dir2;
    other.checkpoint.save_interval = 0;
    other.checkpoint.non_persistent_global_ckpt_dir = own;
    other.checkpoint.async_save = true;
    EXPECT_EQ(run_until(other, -1).iteration, 8);
    EXPECT_EQ(ckpt::list_iterations(dir2), (std::vector<std::int64_t>{8}));
    EXPECT_EQ(ckpt::list_iterations(own), (std::vector<std::int64_t>{6}));
    EXPECT_FALSE(fs::exists(dir2 + "/non_persistent"));
}

TEST(Checkpointing, ExitIntervalSavesThenStops) {
    Config cfg = test::tiny::short_train();
    const std::string dir = test::scratch_dir("exit_interval");
    cfg.checkpoint.save = dir;
    cfg.training.exit_interval = 5;
    const TrainRun r = run_train(cfg, -1);
    EXPECT_EQ(r.iteration, 5);
    EXPECT_EQ(ckpt::read_tracker(dir), 5);
    EXPECT_EQ(ckpt::list_iterations(dir), (std::vector<std::int64_t>{5}));
}

}  // namespace
}  // namespace gpt::train
