// The trainer loop on the CPU backend: learning, determinism, fp16 loss scaling, mixed
// precision tracking fp32, the NaN check, Megatron's log line and the metrics file.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "core/errors.hpp"
#include "model_test_util.hpp"
#include "test_env.hpp"
#include "train/monitor/iteration_log.hpp"
#include "train/trainer.hpp"
#include "trainer_test_util.hpp"

namespace gpt::train {
namespace {

std::vector<double> run_losses(const Config& cfg, MPI_Comm comm = MPI_COMM_SELF,
                               std::vector<IterationRecord>* records = nullptr, int tp = 1) {
    dist::ProcessGroups groups(comm, tp, 1);
    auto be = make_backend("cpu", 0);
    Trainer tr(cfg, groups, *be);
    const int dp = groups.grid().dp_size();
    test::WalkSource src(static_cast<int>(cfg.model.vocab_size), cfg.model.seq_length,
                         cfg.training.micro_batch_size, groups.coords().dp, dp);
    std::vector<double> losses;
    for (std::int64_t i = 0; i < tr.train_iters(); ++i) losses.push_back(tr.train_step(src).lm_loss);
    if (records) *records = tr.history();
    return losses;
}

TEST(Trainer, LossFallsOnALearnableSequence) {
    Config cfg = test::tiny::train();
    cfg.model.hidden_dropout = 0.1;
    cfg.model.attention_dropout = 0.1;
    auto losses = run_losses(cfg);
    EXPECT_NEAR(losses.front(), std::log(64.0), 0.3);
    double last = 0;
    for (int i = 0; i < 5; ++i) last += losses[losses.size() - 1 - i] / 5;
    EXPECT_LT(last, 0.5 * losses.front()) << "first " << losses.front() << " last " << last;
}

TEST(Trainer, SameSeedGivesBitIdenticalLosses) {
    Config cfg = test::tiny::train();
    cfg.training.train_iters = 6;
    cfg.model.hidden_dropout = 0.1;
    cfg.model.attention_dropout = 0.1;
    auto a = run_losses(cfg), b = run_losses(cfg);
    EXPECT_EQ(a, b);
    cfg.training.seed = 99;
    EXPECT_NE(run_losses(cfg), a);
}

// From the initial scale 2^32 the first fp16 iterations overflow: they are skipped, do not
// advance the LR schedule, and the scale follows hysteresis then halving, until steps apply.
TEST(Trainer, Fp16OverflowSkipsStepsAndTheScaleFollowsTheRules) {
    Config cfg = test::tiny::train();
    cfg.training.fp16 = true;
    cfg.training.train_iters = 30;
    cfg.training.hysteresis = 2;
    cfg.training.loss_scale_window = 5;
    std::vector<IterationRecord> rec;
    run_losses(cfg, MPI_COMM_SELF, &rec);
    ASSERT_TRUE(rec[0].skipped);
    EXPECT_EQ(rec[0].loss_scale, 4294967296.0);
    auto ref = optim::LossScaler::dynamic(4294967296.0, 1.0, 5, 2);
    int skipped = 0, applied = 0;
    for (const auto& r : rec) {
        EXPECT_EQ(r.loss_scale, ref.scale()) << "iteration " << r.iteration;
        EXPECT_EQ(r.skipped, std::isnan(r.grad_norm));
        if (!r.skipped && applied++ == 0) {
            EXPECT_EQ(r.lr, 0.0);  // warm-up starts at 0
        }
        skipped += r.skipped;
        ref.update(r.skipped);
    }
    EXPECT_GE(skipped, 2);
    EXPECT_GE(applied, 10);
    // A window of clean steps doubled the scale at least once after it settled.
    bool doubled = false;
    for (std::size_t i = 1; i < rec.size(); ++i)
        doubled |= rec[i].loss_scale == 2 * rec[i - 1].loss_scale;
    EXPECT_TRUE(doubled);
}

TEST(Trainer, HalfPrecisionRunsTrackTheFp32Run) {
    Config cfg = test::tiny::train();
    cfg.training.train_iters = 25;
    auto ref = run_losses(cfg);
    for (int variant = 0; variant < 2; ++variant) {
        Config c = cfg;
        if (variant == 0) {
            c.training.fp16 = true;
            c.training.initial_loss_scale = 4096.0;  // start without overflow
        } else {
            c.training.bf16 = true;
        }
        auto got = run_losses(c);
        for (std::size_t i = 0; i < got.size(); ++i)
            EXPECT_NEAR(got[i], ref[i], 0.03 * ref[i] + 0.02)
                << (variant ? "bf16" : "fp16") << " iteration " << i + 1;
    }
}

TEST(Trainer, NanLossIsAnErrorNamingTheIteration) {
    Config cfg = test::tiny::train();
    dist::ProcessGroups groups(MPI_COMM_SELF, 1, 1);
    auto be = make_backend("cpu", 0);
    Trainer tr(cfg, groups, *be);
    test::WalkSource src(61, cfg.model.seq_length, cfg.training.micro_batch_size);
    tr.train_step(src);
    std::vector<float> p(static_cast<std::size_t>(tr.chunks().chunk(0).layout().total_elements()));
    tr.chunks().chunk(0).get_parameters(p.data());
    for (std::size_t i = 0; i < p.size(); ++i)  // poisons every row the batch can touch
        if (i % 3 == 0) p[i] = std::numeric_limits<float>::quiet_NaN();
    tr.chunks().chunk(0).set_parameters(p.data());
    try {
        tr.train_step(src);
        FAIL() << "expected NumericError";
    } catch (const NumericError& e) {
        EXPECT_NE(std::string(e.what()).find("lm loss is NaN at iteration 2 on rank 0"), std::string::npos) << e.what();
    }
}

// The optimizer takes each step's weight decay from the schedule (Megatron's
// --weight-decay-incr-style), not --weight-decay: a linear schedule held at 0.2 trains as a
// constant 0.2, not as the --weight-decay it leaves unused.
TEST(Trainer, WeightDecayComesFromTheSchedule) {
    Config cfg = test::tiny::train();
    cfg.training.train_iters = 6;
    cfg.optimizer.weight_decay = 0.2;
    const auto constant = run_losses(cfg);
    cfg.optimizer.weight_decay = 0.01;
    const auto unused = run_losses(cfg);
    cfg.optimizer.weight_decay_incr_style = WeightDecayIncrStyle::Linear;
    cfg.optimizer.start_weight_decay = cfg.optimizer.end_weight_decay = 0.2;
    const auto scheduled = run_losses(cfg);
    EXPECT_EQ(scheduled, constant);
    EXPECT_NE(scheduled, unused);
}

// --log-params-norm: after each step, the L2 norm of the model's parameters, each counted
// once (the head's copy of the tied embedding left out), as Megatron's calc_params_l2_norm.
TEST(Trainer, ParamsNormIsTheNormOfTheParameters) {
    Config cfg = test::tiny::train();
    cfg.training.train_iters = 3;
    cfg.optimizer.lr_warmup_iters = 1;
    std::vector<IterationRecord> off;
    run_losses(cfg, MPI_COMM_SELF, &off);
    EXPECT_TRUE(std::isnan(off.back().params_norm));
    cfg.logging.log_params_norm = true;
    dist::ProcessGroups groups(MPI_COMM_SELF, 1, 1);
    auto be = make_backend("cpu", 0);
    Trainer tr(cfg, groups, *be);
    test::WalkSource src(static_cast<int>(cfg.model.vocab_size), cfg.model.seq_length,
                         cfg.training.micro_batch_size, 0, 1);
    for (int i = 0; i < 3; ++i) tr.train_step(src);
    model::GptModel& m = tr.chunks().chunk(0);
    ASSERT_EQ(m.options().dtype, DType::F32);  // the model's own parameters are the main ones
    const float* p = static_cast<const float*>(m.params());
    double sum = 0.0;
    for (const auto& e : m.layout().entries()) {
        if (e.name == model::ParamLayout::word_embeddings_for_head()) continue;
        for (std::int64_t i = 0; i < e.numel; ++i) sum += static_cast<double>(p[e.offset + i]) * p[e.offset + i];
    }
    // Both sum the same fp32 squares in double, in other orders: relative error below n x 2^-53.
    const auto& h = tr.history();
    EXPECT_NEAR(h.back().params_norm, std::sqrt(sum), 1e-12 * std::sqrt(sum));
    EXPECT_NE(h.at(0).params_norm, h.at(1).params_norm);  // after each step's update
}

// --log-num-zeros-in-grad: the gradient elements equal to zero, each parameter once, the
// alignment padding between parameters left out (Megatron's count_zeros_fp32).
TEST(Trainer, NumZerosCountsTheZeroGradients) {
    Config cfg = test::tiny::train();
    cfg.training.train_iters = 2;
    cfg.optimizer.lr_warmup_iters = 1;
    // Padded to 64, untied: four word-embedding rows that no input token reaches.
    cfg.model.vocab_size = 60;
    cfg.model.untie_embeddings_and_output_weights = true;
    cfg.logging.log_num_zeros_in_grad = true;
    dist::ProcessGroups groups(MPI_COMM_SELF, 1, 1);
    auto be = make_backend("cpu", 0);
    Trainer tr(cfg, groups, *be);
    test::WalkSource src(60, cfg.model.seq_length, cfg.training.micro_batch_size, 0, 1);
    tr.train_step(src);
    model::GptModel& m = tr.chunks().chunk(0);
    std::int64_t zeros = 0, padding = m.padded_elements();
    for (const auto& e : m.layout().entries()) {
        padding -= e.numel;
        for (std::int64_t i = 0; i < e.numel; ++i) zeros += m.grads()[e.offset + i] == 0.0f;
    }
    ASSERT_GT(padding, 0);  // the layout pads, so a count of the whole buffer would be wrong
    EXPECT_GE(zeros, 4 * cfg.model.hidden_size);
    EXPECT_EQ(tr.history().back().num_zeros, zeros);
}

// WalkSource's micro-batches with end-of-document tokens written in: micro-batch n gets the
// EOD at the positions k with (k + n) % (n + 2) == 0, so micro-batches count different
// numbers of tokens under --eod-mask-loss (the last token, a target only, included).
class EodWalkSource final : public MicroBatchSource {
public:
    EodWalkSource(const Config& cfg, std::int32_t eod, int dp_rank = 0, int dp_size = 1)
        : walk_(static_cast<int>(cfg.model.vocab_size), cfg.model.seq_length, cfg.training.micro_batch_size,
                dp_rank, dp_size),
          eod_(eod), elems_(cfg.training.micro_batch_size * (cfg.model.seq_length + 1)) {}
    void next(std::int32_t* tokens) override {
        walk_.next(tokens);
        const int n = calls_++;
        for (int k = 0; k < elems_; ++k)
            if ((k + n) % (n + 2) == 0) tokens[k] = eod_;
    }

private:
    test::WalkSource walk_;
    std::int32_t eod_;
    int elems_, calls_ = 0;
};

// --eod-mask-loss, and --calculate-per-token-loss, normalised as Megatron's loss_func and
// schedules: one iteration's gradients equal the model's own backward of each micro-batch
// with Megatron's weight, 1 / (its counted tokens x micro-batches) (the per-token sum: 1,
// then the step divides by the global batch's counted tokens); the reported loss is the
// global batch's masked sum over its counted tokens; the grad norm follows the division.
// The reference runs the same operations in the same order, so the gradients match exactly.
TEST(Trainer, EodMaskLossNormalisesAsMegatron) {
    for (const bool per_token : {false, true}) {
        SCOPED_TRACE(per_token ? "--calculate-per-token-loss" : "per micro-batch");
        Config cfg = test::tiny::train();
        cfg.training.train_iters = 2;
        cfg.optimizer.lr_warmup_iters = 1;
        cfg.training.global_batch_size = 6;  // 3 micro-batches of 2
        cfg.data.mock_data = true;            // the EOD: the mock data's, vocab size - 1
        cfg.data.eod_mask_loss = true;
        cfg.training.calculate_per_token_loss = per_token;
        const std::int32_t eod = static_cast<std::int32_t>(cfg.model.vocab_size) - 1;
        dist::ProcessGroups groups(MPI_COMM_SELF, 1, 1);
        auto be = make_backend("cpu", 0);
        Trainer tr(cfg, groups, *be);
        model::GptModel& m = tr.chunks().chunk(0);
        ASSERT_EQ(m.options().loss_mask_token, eod);
        std::vector<float> p0(static_cast<std::size_t>(m.layout().total_elements()));
        m.get_parameters(p0.data());

        auto tp = test::self_comm();
        model::GptModel ref(m.dims(), m.chunk(), m.options(), cfg.training.micro_batch_size, *be, *tp);
        ref.set_parameters(p0.data());
        ref.zero_grads();
        EodWalkSource ref_src(cfg, eod);
        const int nmb = 3;
        std::vector<std::int32_t> tokens(static_cast<std::size_t>(2 * (cfg.model.seq_length + 1)));
        double sum = 0.0, counted = 0.0;
        std::vector<std::int64_t> counts;
        for (int mb = 0; mb < nmb; ++mb) {
            ref_src.next(tokens.data());
            ref.set_batch(0, tokens.data());
            sum += ref.forward(0, true, static_cast<std::uint64_t>(mb));
            const std::int64_t c = ref.loss_tokens(0);
            counts.push_back(c);
            counted += static_cast<double>(c);
            ref.backward(0, per_token ? 1.0f : static_cast<float>(1.0 / (static_cast<double>(c) * nmb)));
        }
        ASSERT_NE(counts[0], counts[1]);
        ASSERT_NE(counts[1], counts[2]);
        ASSERT_LT(counts[2], m.tokens());
        std::vector<float> g_ref(p0.size());
        ref.get_grads(g_ref.data());

        EodWalkSource src(cfg, eod);
        const IterationRecord rec = tr.train_step(src);
        std::vector<float> g(p0.size());
        m.get_grads(g.data());
        int differ = 0;
        for (std::size_t i = 0; i < g.size(); ++i) differ += g[i] != g_ref[i];
        EXPECT_EQ(differ, 0) << "of " << g.size() << " gradient elements";
        EXPECT_DOUBLE_EQ(rec.lm_loss, sum / counted);
        double sq = 0.0;
        for (const auto& e : m.layout().entries()) {
            if (e.name == model::ParamLayout::word_embeddings_for_head()) continue;
            for (std::int64_t i = 0; i < e.numel; ++i) sq += double(g_ref[e.offset + i]) * g_ref[e.offset + i];
        }
        // The same fp32 squares summed in double in another order: far below 1e-12 relative.
        const double norm = std::sqrt(sq) / (per_token ? counted : 1.0);
        EXPECT_NEAR(rec.grad_norm, norm, 1e-12 * norm);

        // Evaluation as Megatron's evaluate: every micro-batch's masked sum over all their
        // counted tokens, on the updated parameters.
        std::vector<float> p1(p0.size());
        m.get_parameters(p1.data());
        ref.set_parameters(p1.data());
        EodWalkSource eval_ref_src(cfg, eod), eval_src(cfg, eod);
        sum = counted = 0.0;
        for (int mb = 0; mb < nmb; ++mb) {
            eval_ref_src.next(tokens.data());
            ref.set_batch(0, tokens.data());
            sum += ref.forward(0, false, 0);
            counted += static_cast<double>(ref.loss_tokens(0));
        }
        EXPECT_DOUBLE_EQ(tr.evaluate(eval_src, 1), sum / counted);
    }
}

// tiny::train with --rampup-batch-size 2 2 8 to a global batch of 6 in micro-batches of 1,
// trained and scheduled by samples.
Config ramp_2_2_8(std::int64_t train_samples) {
    Config cfg = test::tiny::train();
    cfg.training.micro_batch_size = 1;
    cfg.training.global_batch_size = 6;
    cfg.training.rampup_batch_size = {2, 2, 8};
    cfg.training.train_iters = 0;
    cfg.training.train_samples = train_samples;
    cfg.optimizer.lr_warmup_iters = 0;
    cfg.optimizer.lr_warmup_samples = 4;
    cfg.optimizer.lr_decay_samples = train_samples;
    return cfg;
}

// --rampup-batch-size 2 2 8 to a global batch of 6 over 30 samples: Megatron's calculator
// and update_train_iters give 6 iterations of 2, 2, 4, 6, 6, 6 samples (26 consumed). Each
// iteration runs its batch (micro-batches of 1), advances the consumed samples and the
// sample-based LR schedule by it, and while the batch is 2 trains bit for bit as a run
// whose global batch is always 2 (same data, same schedule).
TEST(Trainer, RampupBatchSizeGrowsAsMegatronsCalculator) {
    Config cfg = ramp_2_2_8(30);
    std::vector<IterationRecord> ramp;
    run_losses(cfg, MPI_COMM_SELF, &ramp);
    const std::vector<std::int64_t> want{2, 2, 4, 6, 6, 6};
    ASSERT_EQ(ramp.size(), want.size());
    const optim::LrScheduler lr = optim::LrScheduler::from_config(cfg.optimizer, 0, 30, 6);
    std::int64_t consumed = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(ramp[i].global_batch, want[i]) << "iteration " << i + 1;
        EXPECT_DOUBLE_EQ(ramp[i].lr, lr.lr_at(consumed)) << "iteration " << i + 1;
        consumed += want[i];
    }
    Config two = cfg;
    two.training.rampup_batch_size.clear();
    two.training.global_batch_size = 2;
    std::vector<IterationRecord> constant;
    run_losses(two, MPI_COMM_SELF, &constant);
    for (std::size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(ramp[i].lm_loss, constant[i].lm_loss) << "iteration " << i + 1;
        EXPECT_EQ(ramp[i].grad_norm, constant[i].grad_norm) << "iteration " << i + 1;
    }
    EXPECT_NE(ramp[2].lm_loss, constant[2].lm_loss);  // 4 samples against 2
}

// --step-batch-size-schedule "0:2 64:4 128:6" at sequence 16 (thresholds at samples 4 and 8)
// over 26 samples: Megatron's calculator gives 2, 2, 4, 6, 6, 6, the batches of the ramp above
// on 26 samples, and the run trains bit for bit as that ramp: each iteration's batch, data,
// loss, gradient norm and learning rate.
TEST(Trainer, StepBatchSizeScheduleTrainsAsTheRampItMatches) {
    const Config ramp_cfg = ramp_2_2_8(26);
    ASSERT_EQ(ramp_cfg.model.seq_length, 16);
    Config step_cfg = ramp_cfg;
    step_cfg.training.rampup_batch_size.clear();
    step_cfg.training.step_batch_size_schedule = "0:2 64:4 128:6";
    std::vector<IterationRecord> ramp, step;
    run_losses(ramp_cfg, MPI_COMM_SELF, &ramp);
    run_losses(step_cfg, MPI_COMM_SELF, &step);
    const std::vector<std::int64_t> want{2, 2, 4, 6, 6, 6};
    ASSERT_EQ(step.size(), want.size());
    ASSERT_EQ(ramp.size(), want.size());
    const optim::LrScheduler lr = optim::LrScheduler::from_config(step_cfg.optimizer, 0, 26, 6);
    std::int64_t consumed = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(step[i].global_batch, want[i]) << "iteration " << i + 1;
        EXPECT_DOUBLE_EQ(step[i].lr, lr.lr_at(consumed)) << "iteration " << i + 1;
        EXPECT_EQ(step[i].lm_loss, ramp[i].lm_loss) << "iteration " << i + 1;
        EXPECT_EQ(step[i].grad_norm, ramp[i].grad_norm) << "iteration " << i + 1;
        consumed += want[i];
    }
}

// A scheduled batch the layout cannot split stops the run before its first iteration, not
// when the batch comes: 3 samples do not split into micro-batches of 2 (the trainer checks
// from where it starts; validation skips runs that may resume).
TEST(Trainer, StepBatchSizeScheduleRefusesALaterBatchBeforeTraining) {
    Config cfg = test::tiny::train();
    cfg.training.micro_batch_size = 2;
    cfg.training.step_batch_size_schedule = "0:2 64:3 128:4";  // samples 0, 4, 8 at sequence 16
    cfg.training.global_batch_size = 4;
    cfg.training.train_iters = 0;
    cfg.training.train_samples = 16;
    cfg.optimizer.lr_warmup_iters = 0;
    dist::ProcessGroups groups(MPI_COMM_SELF, 1, 1);
    auto be = make_backend("cpu", 0);
    Trainer tr(cfg, groups, *be);
    test::WalkSource src(static_cast<int>(cfg.model.vocab_size), cfg.model.seq_length, 2, 0, 1);
    try {
        tr.train(src, nullptr, nullptr);
        ADD_FAILURE() << "trained a batch of 3 in micro-batches of 2";
    } catch (const UsageError& e) {
        EXPECT_EQ(std::string(e.what()).find("--step-batch-size-schedule: the global batch 3 (from sample 4) is not "
                                             "divisible by micro-batch-size x DP = 2 x 1 = 2"),
                  0u)
            << e.what();
    }
    EXPECT_EQ(tr.iteration(), 0);
}

TEST(Trainer, DataParallelMatchesOneRankWithTheSameGlobalBatch) {
    int world = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world != 2) GTEST_SKIP() << "needs 2 ranks (registered as test_train.np2)";
    Config cfg = test::tiny::train();
    cfg.training.train_iters = 5;
    cfg.model.hidden_dropout = 0.1;
    auto one = run_losses(cfg, MPI_COMM_SELF);
    auto two = run_losses(cfg, MPI_COMM_WORLD);
    for (std::size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(one[i], two[i], 1e-5 * one[i]);
    // --log-params-norm with the distributed optimizer: each DP rank's shard of the main
    // parameters, summed over the data-parallel group, is the whole model's norm.
    cfg.logging.log_params_norm = true;
    cfg.logging.log_num_zeros_in_grad = true;
    cfg.model.vocab_size = 60;  // four padded rows of an untied embedding: zero gradients to count
    cfg.model.untie_embeddings_and_output_weights = true;
    std::vector<IterationRecord> r1, r2;
    run_losses(cfg, MPI_COMM_SELF, &r1);
    EXPECT_GT(r1.back().num_zeros, 0);
    cfg.parallel.use_distributed_optimizer = true;
    run_losses(cfg, MPI_COMM_WORLD, &r2);
    for (std::size_t i = 0; i < r1.size(); ++i) {
        EXPECT_NEAR(r1[i].params_norm, r2[i].params_norm, 1e-5 * r1[i].params_norm) << "iteration " << i + 1;
        EXPECT_EQ(r1[i].num_zeros, r2[i].num_zeros) << "iteration " << i + 1;
    }
}

// Tensor parallel over 2 ranks: heads, MLP and vocabulary sharded, same losses and grad norms
// as one rank (attention dropout is per-TP-rank by design, so it is off here).
TEST(Trainer, TensorParallelMatchesOneRank) {
    int world = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world != 2) GTEST_SKIP() << "needs 2 ranks (registered as test_train.np2)";
    Config cfg = test::tiny::train();
    cfg.training.train_iters = 5;
    cfg.model.hidden_dropout = 0.1;
    cfg.model.vocab_size = 60;  // four padded rows of an untied embedding: zero gradients to count
    cfg.model.untie_embeddings_and_output_weights = true;
    cfg.logging.log_params_norm = true;
    cfg.logging.log_num_zeros_in_grad = true;
    std::vector<IterationRecord> r1, r2;
    auto one = run_losses(cfg, MPI_COMM_SELF, &r1);
    cfg.parallel.tensor_model_parallel_size = 2;
    auto two = run_losses(cfg, MPI_COMM_WORLD, &r2, 2);
    for (std::size_t i = 0; i < one.size(); ++i) {
        EXPECT_NEAR(one[i], two[i], 1e-5 * one[i]);
        EXPECT_NEAR(r1[i].grad_norm, r2[i].grad_norm, 1e-4 * r1[i].grad_norm);
        // TP-replicated parameters (layernorms, row-parallel biases) counted once.
        EXPECT_NEAR(r1[i].params_norm, r2[i].params_norm, 1e-5 * r1[i].params_norm);
        EXPECT_GT(r1[i].num_zeros, 0);
        EXPECT_EQ(r1[i].num_zeros, r2[i].num_zeros);
    }
}

TEST(Trainer, TrainLogsEvaluatesAndWritesMetrics) {
    Config cfg = test::tiny::train();
    cfg.training.train_iters = 6;
    cfg.training.eval_interval = 3;
    const std::string dir = test::scratch_dir("trainer_metrics");
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);  // each rank trains alone here: one file each
    cfg.logging.metrics_file = dir + "/metrics." + std::to_string(rank) + ".jsonl";
    cfg.logging.log_interval = 2;
    {
        dist::ProcessGroups groups(MPI_COMM_SELF, 1, 1);
        auto be = make_backend("cpu", 0);
        Trainer tr(cfg, groups, *be);
        test::WalkSource train(61, cfg.model.seq_length, 2), valid(61, cfg.model.seq_length, 2, 0, 1, 1000000);
        tr.train(train, &valid, nullptr);
        EXPECT_EQ(tr.iteration(), 6);
        const MemoryReport m = tr.memory();
        EXPECT_GT(m.params, 0u);
        EXPECT_EQ(m.grads, m.params);          // fp32 model: same element count and size
        EXPECT_EQ(m.optimizer, 2 * m.params);  // moments only: the fp32 model is the main copy
        EXPECT_GE(m.peak, m.params + m.grads + m.optimizer + m.activations + m.buffers);
    }
    std::ifstream in(cfg.logging.metrics_file);
    std::string line;
    int iters = 0, evals = 0;
    while (std::getline(in, line)) {
        if (line.find("\"split\"") != std::string::npos) {
            ++evals;
            EXPECT_NE(line.find("\"ppl\""), std::string::npos);
        } else {
            ++iters;
            for (const char* key : {"\"iteration\": ", "\"lm_loss\"", "\"lr\"", "\"grad_norm\"",
                                    "\"loss_scale\"", "\"elapsed_ms\"", "\"tokens_per_s\"", "\"skipped\": false"})
                EXPECT_NE(line.find(key), std::string::npos) << key << " in " << line;
        }
    }
    EXPECT_EQ(iters, 6);
    EXPECT_EQ(evals, 3);  // iterations 3 and 6, and the final one on the validation set
}

TEST(IterationLog, FormatsMegatronsLines) {
    IntervalStats s;
    s.iteration = 20;
    s.train_iters = 500;
    s.consumed_samples = 640;
    s.elapsed_ms_per_iteration = 1234.56;
    s.tflops_per_gpu = 0.04;
    s.learning_rate = 1.5e-4;
    s.global_batch_size = 32;
    s.lm_loss = 7.25;
    s.loss_scale = 65536;
    s.grad_norm = 1.2345;
    s.skipped_iterations = 1;
    EXPECT_EQ(format_iteration_line(s),
              " iteration       20/     500 | consumed samples:          640 | elapsed time per "
              "iteration (ms): 1234.6 | throughput per GPU (TFLOP/s/GPU): 0.0 | learning rate: "
              "1.500000E-04 | global batch size:    32 | lm loss: 7.250000E+00 | loss scale: "
              "65536.0 | grad norm: 1.234 | number of skipped iterations:   1 | number of nan "
              "iterations:   0 |");
    const std::string block = format_validation_block("iteration 20", std::log(100.0));
    EXPECT_NE(block.find(" validation loss at iteration 20 | lm loss value: 4.605170E+00 | lm loss PPL: 1.000000E+02 | "),
              std::string::npos);
    EXPECT_EQ(block.front(), '-');
    ModelConfig m;
    m.num_layers = 4;
    m.hidden_size = 256;
    m.seq_length = 256;
    const double flops = model_flops_per_iteration(m, 50304, 8);
    const double formula = 72.0 * 8 * 256 * 4 * 256.0 * 256 * (1 + 256.0 / (6 * 256) + 50304.0 / (12 * 256 * 4));
    EXPECT_NEAR(flops, formula, 1e-9 * formula);
    // Megatron's count with 2 K/V groups of 8 heads and SwiGLU (ffn 688): 12 B s l h^2
    // ((1 + 2/8 + s/h) + 1.5 f/h + V/(2 l h)).
    m.num_attention_heads = 8;
    m.group_query_attention = true;
    m.num_query_groups = 2;
    m.swiglu = true;
    m.ffn_hidden_size = 688;
    const double llama = 12.0 * 8 * 256 * 4 * 256.0 * 256 *
                         ((1 + 0.25 + 1) + 1.5 * 688 / 256.0 + 50304.0 / (2 * 4 * 256));
    EXPECT_NEAR(model_flops_per_iteration(m, 50304, 8), llama, 1e-9 * llama);
}

TEST(Trainer, RejectsImpossibleCombinations) {
    dist::ProcessGroups groups(MPI_COMM_SELF, 1, 1);
    Config cfg = test::tiny::train();
    cfg.training.fp16 = cfg.training.bf16 = true;
    EXPECT_THROW(check_supported(cfg, groups), UsageError);
    cfg = test::tiny::train();
    cfg.training.loss_scale = 1024;
    EXPECT_THROW(check_supported(cfg, groups), UsageError);
}

}  // namespace
}  // namespace gpt::train
