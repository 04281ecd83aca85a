// Continued pretraining from a checkpoint (Megatron's load_checkpoint flags): --finetune
// takes the parameters only, --no-load-optim keeps the iteration and data position but starts
// Adam, the LR scheduler and the loss scaler afresh, --no-load-rng restarts the dropout
// stream, and --override-opt_param-scheduler / --use-checkpoint-opt_param-scheduler pick
// whose learning-rate schedule the resumed run follows.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <memory>
#include <vector>

#include "config/validate.hpp"
#include "core/errors.hpp"
#include "test_env.hpp"
#include "train/trainer.hpp"
#include "trainer_test_util.hpp"

namespace gpt::train {
namespace {

// One single-process run: optionally loads cfg.checkpoint.load, optionally sets the
// parameters first (a "fresh run from these parameters"), trains `iters`, optionally saves.
struct Job {
    dist::ProcessGroups groups{MPI_COMM_SELF, 1, 1};
    std::unique_ptr<Backend> be = make_backend("cpu", 0);
    std::unique_ptr<Trainer> tr;
    std::vector<IterationRecord> records;

    explicit Job(const Config& cfg) { tr = std::make_unique<Trainer>(cfg, groups, *be); }
    void train(int iters) {
        test::WalkSource src(61, 16, 2, 0, 1, tr->consumed_train_samples());
        for (int i = 0; i < iters; ++i) tr->train_step(src);
        records = tr->history();
    }
    std::vector<float> params() {
        std::vector<float> p(static_cast<std::size_t>(tr->chunks().chunk(0).layout().total_elements()));
        tr->chunks().chunk(0).get_parameters(p.data());
        return p;
    }
    std::vector<float> exp_avg() {
        auto& o = tr->chunks().optimizer(0);
        return {o.exp_avg(), o.exp_avg() + o.shard_size()};
    }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool all_zero(const std::vector<float>& v) {
    for (float x : v)
        if (x != 0.0f) return false;
    return true;
}

// A checkpoint after 4 iterations; returns its parameters and first moments.
struct Saved {
    std::string dir;
    std::vector<float> params, exp_avg;
};

Saved save_after_four(const std::string& name, Config cfg) {
    Saved s;
    s.dir = test::scratch_dir(name);
    cfg.checkpoint.save = s.dir;
    Job r(cfg);
    r.train(4);
    r.tr->save_checkpoint();
    s.params = r.params();
    s.exp_avg = r.exp_avg();
    EXPECT_FALSE(all_zero(s.exp_avg));
    return s;
}

TEST(ContinuedPretraining, FinetuneIsAFreshRunFromTheParameters) {
    const Config cfg = test::tiny::short_train();
    const Saved s = save_after_four("finetune", cfg);
    Config ft = cfg;
    ft.checkpoint.load = s.dir;
    ft.checkpoint.finetune = true;
    Job a(ft);
    ASSERT_TRUE(a.tr->load_checkpoint().has_value());
    EXPECT_EQ(a.tr->iteration(), 0);
    EXPECT_EQ(a.tr->consumed_train_samples(), 0);
    EXPECT_EQ(a.tr->chunks().optimizer(0).steps(), 0);
    EXPECT_TRUE(same_bits(a.params(), s.params));
    EXPECT_TRUE(all_zero(a.exp_avg()));
    a.train(3);
    // The same run started without a checkpoint from the same parameters.
    Job b(cfg);
    b.tr->chunks().chunk(0).set_parameters(s.params.data());
    b.train(3);
    ASSERT_EQ(a.records.size(), b.records.size());
    for (std::size_t i = 0; i < a.records.size(); ++i) {
        EXPECT_EQ(a.records[i].iteration, b.records[i].iteration);
        EXPECT_EQ(a.records[i].lm_loss, b.records[i].lm_loss) << "iteration " << i + 1;
        EXPECT_EQ(a.records[i].lr, b.records[i].lr) << "iteration " << i + 1;
    }
    EXPECT_TRUE(same_bits(a.params(), b.params()));
    EXPECT_TRUE(same_bits(a.exp_avg(), b.exp_avg()));
}

TEST(ContinuedPretraining, NoLoadOptimKeepsIterationAndDataButResetsAdamAndSchedule) {
    const Config cfg = test::tiny::short_train();
    const Saved s = save_after_four("no_load_optim", cfg);
    Config c = cfg;
    c.checkpoint.load = s.dir;
    c.checkpoint.no_load_optim = true;
    Job a(c);
    ASSERT_TRUE(a.tr->load_checkpoint().has_value());
    EXPECT_EQ(a.tr->iteration(), 4);
    EXPECT_EQ(a.tr->consumed_train_samples(), 4 * cfg.training.global_batch_size);
    EXPECT_EQ(a.tr->chunks().optimizer(0).steps(), 0);
    EXPECT_TRUE(same_bits(a.params(), s.params));
    EXPECT_TRUE(all_zero(a.exp_avg()));
    a.train(1);
    // The scheduler restarted: the first step's learning rate is the warm-up's first.
    Job fresh(cfg);
    fresh.train(1);
    EXPECT_EQ(a.records.at(0).iteration, 5);
    EXPECT_EQ(a.records.at(0).lr, fresh.records.at(0).lr);
    // A plain resume keeps the moments and the schedule.
    Config plain = cfg;
    plain.checkpoint.load = s.dir;
    Job b(plain);
    b.tr->load_checkpoint();
    EXPECT_TRUE(same_bits(b.exp_avg(), s.exp_avg));
    b.train(1);
    EXPECT_NE(b.records.at(0).lr, a.records.at(0).lr);
}

TEST(ContinuedPretraining, NoLoadRngRestartsTheDropoutStreamOnly) {
    Config cfg = test::tiny::short_train();
    cfg.model.hidden_dropout = 0.1;
    cfg.model.attention_dropout = 0.1;
    const Saved s = save_after_four("no_load_rng", cfg);
    Config c = cfg;
    c.checkpoint.load = s.dir;
    Job plain(c);
    plain.tr->load_checkpoint();
    plain.train(1);
    c.checkpoint.no_load_rng = true;
    Job a(c);
    a.tr->load_checkpoint();
    EXPECT_EQ(a.tr->iteration(), 4);
    EXPECT_TRUE(same_bits(a.exp_avg(), s.exp_avg));  // the optimizer is still loaded
    a.train(1);
    // Same parameters, data, optimizer and LR: only the dropout masks differ.
    EXPECT_EQ(a.records.at(0).lr, plain.records.at(0).lr);
    EXPECT_NE(a.records.at(0).lm_loss, plain.records.at(0).lm_loss);
}

TEST(ContinuedPretraining, SchedulerFromTheFlagsOrTheCheckpoint) {
    const Config cfg = test::tiny::short_train();
    const Saved s = save_after_four("scheduler", cfg);
    Job straight(cfg);
    straight.train(5);
    Config c = cfg;
    c.checkpoint.load = s.dir;
    c.optimizer.lr = cfg.optimizer.lr / 2;
    c.checkpoint.use_checkpoint_opt_param_scheduler = true;
    Job ckpt_sched(c);
    ckpt_sched.tr->load_checkpoint();
    ckpt_sched.train(1);
    EXPECT_EQ(ckpt_sched.records.at(0).lr, straight.records.at(4).lr);
    c.checkpoint.use_checkpoint_opt_param_scheduler = false;
    c.checkpoint.override_opt_param_scheduler = true;
    Job flags_sched(c);
    flags_sched.tr->load_checkpoint();
    flags_sched.train(1);
    Config half = cfg;
    half.optimizer.lr = c.optimizer.lr;
    Job straight_half(half);
    straight_half.train(5);
    EXPECT_EQ(flags_sched.records.at(0).lr, straight_half.records.at(4).lr);
    EXPECT_NE(flags_sched.records.at(0).lr, straight.records.at(4).lr);
    // Both flags at once: refused with the other flags, before the run (config/validate.cpp).
    Config one = c;
    EXPECT_NO_THROW(validate_model_and_training(one));
    c.checkpoint.use_checkpoint_opt_param_scheduler = true;
    try {
        validate_model_and_training(c);
        ADD_FAILURE() << "both schedule flags were accepted";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("exclude each other"), std::string::npos) << e.what();
    }
}

// --decoupled-lr through the trainer: the word embeddings (tied: also the head) step at the
// decoupled group's learning rate. At 0 they stay exactly as initialised while everything else
// moves; a checkpoint's schedule check compares the group (a run resuming with another
// --decoupled-lr and --use-checkpoint-opt_param-scheduler takes the checkpoint's, so its
// embeddings stay frozen).
TEST(ContinuedPretraining, DecoupledLrStepsTheEmbeddingsOnTheirOwnSchedule) {
    Config cfg = test::tiny::short_train();
    cfg.optimizer.decoupled_lr = 0.0;
    cfg.optimizer.decoupled_min_lr = 0.0;
    Job fresh(cfg);
    const std::vector<float> init = fresh.params();
    const Saved s = save_after_four("decoupled", cfg);
    const model::ParamLayout& layout = fresh.tr->chunks().chunk(0).layout();
    auto moved = [&](const std::vector<float>& p, const model::ParamEntry& e) {
        for (std::int64_t k = 0; k < e.numel; ++k) {
            const auto i = static_cast<std::size_t>(e.offset + k);
            if (p[i] != init[i]) return true;
        }
        return false;
    };
    for (const auto& e : layout.entries())
        EXPECT_EQ(moved(s.params, e), e.name != model::ParamLayout::word_embeddings()) << e.name;
    Config c = cfg;
    c.checkpoint.load = s.dir;
    c.optimizer.decoupled_lr = cfg.optimizer.lr;
    c.checkpoint.use_checkpoint_opt_param_scheduler = true;
    Job resumed(c);
    resumed.tr->load_checkpoint();
    resumed.train(1);
    EXPECT_FALSE(moved(resumed.params(), layout.at(model::ParamLayout::word_embeddings())));
    c.checkpoint.use_checkpoint_opt_param_scheduler = false;
    Job flags(c);
    flags.tr->load_checkpoint();
    flags.train(1);
    EXPECT_TRUE(moved(flags.params(), layout.at(model::ParamLayout::word_embeddings())));
}

}  // namespace
}  // namespace gpt::train
