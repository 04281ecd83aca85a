// The guards of a long run: --check-for-spiky-loss (detector, skip, stop) and
// --check-for-nan-in-loss-and-grad (the report naming the rank and the tensor), plus
// --profile's refusal on the CPU backend.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <set>

#include "core/errors.hpp"
#include "train/monitor/nan_check.hpp"
#include "train/monitor/spike_guard.hpp"
#include "train/monitor/timer_log.hpp"
#include "train/trainer.hpp"
#include "trainer_test_util.hpp"

namespace gpt::train {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(SpikeDetector, ZScoreOverTheFullWindowWithTheSampleStd) {
    SpikeDetector d(4, 3.0);
    for (double x : {1.0, 2.0, 3.0, 4.0}) EXPECT_FALSE(d.judge(x).spike);  // filling: not judged
    // mean 2.5, sample std sqrt(5/3): 6.5 is 4 / 1.29099 = 3.098 std above.
    const SpikeVerdict v = d.judge(6.5);
    EXPECT_TRUE(v.spike);
    EXPECT_DOUBLE_EQ(v.mean, 2.5);
    EXPECT_NEAR(v.zscore, 4.0 / std::sqrt(5.0 / 3.0), 1e-12);
    // The spike did not join the window: the same loss is judged the same way again.
    EXPECT_NEAR(d.judge(6.5).zscore, v.zscore, 1e-12);
    EXPECT_FALSE(d.judge(6.3).spike);  // 2.94 std: below the threshold, joins the window
    EXPECT_FALSE(d.judge(-100.0).spike);  // falling is progress, never a spike
}

TEST(SpikeDetector, FlatLossHasAOnePercentFloor) {
    SpikeDetector d(3, 3.0);
    for (int i = 0; i < 3; ++i) d.judge(2.0);
    const SpikeVerdict v = d.judge(2.07);  // 3.5 floors (0.02) above
    EXPECT_TRUE(v.spike);
    EXPECT_EQ(v.stddev, 0.0);
    EXPECT_NEAR(v.zscore, 3.5, 1e-9);
    EXPECT_FALSE(d.judge(2.05).spike);  // 2.5 floors above
}

TEST(SpikeGuard, StopsAtTheConsecutiveLimitNamingTheCheckpoint) {
    MonitorConfig m;
    m.spiky_loss_window = 3;
    m.spiky_loss_zscore = 3.0;
    m.spiky_loss_max_consecutive = 2;
    SpikeGuard g(m);
    for (int it = 1; it <= 3; ++it) EXPECT_FALSE(g.skip(1.0 + 0.1 * it, it, 0, 8, "ck"));
    EXPECT_TRUE(g.skip(9.0, 4, 24, 8, "ck"));
    EXPECT_FALSE(g.skip(1.2, 5, 32, 8, "ck"));  // a good step ends the run of spikes
    EXPECT_TRUE(g.skip(9.0, 6, 40, 8, "ck"));
    try {
        g.skip(9.0, 7, 48, 8, "/ckpt/iter_0000005");
        FAIL() << "a second spike in a row passed";
    } catch (const NumericError& e) {
        EXPECT_TRUE(contains(e.what(), "2 spiky losses in a row")) << e.what();
        EXPECT_TRUE(contains(e.what(), "iteration 7")) << e.what();
        EXPECT_TRUE(contains(e.what(), "samples 48..55")) << e.what();
        EXPECT_TRUE(contains(e.what(), "last good checkpoint: /ckpt/iter_0000005")) << e.what();
    }
    EXPECT_EQ(g.total(), 3);
}

// The walk, except at the listed iterations: Replace gives random tokens (by iteration 32
// the model has learnt the walk down to a loss near 1; random tokens cost ~ln 64 = 4.2 or
// more: a spike of tens of standard deviations), Drop reads those micro-batches and throws them away
// (as if the iteration had never been).
class PlantedSource final : public MicroBatchSource {
public:
    enum class Mode { Replace, Drop };
    PlantedSource(const Config& cfg, const dist::ProcessGroups& g, std::int64_t per_iteration,
                  std::set<std::int64_t> iterations, Mode mode)
        : walk_(cfg.model.vocab_size, cfg.model.seq_length, cfg.training.micro_batch_size, g.coords().dp,
                g.grid().dp_size()),
          elems_(static_cast<std::size_t>(cfg.training.micro_batch_size) * (cfg.model.seq_length + 1)),
          vocab_(cfg.model.vocab_size), per_(per_iteration), its_(std::move(iterations)), mode_(mode) {}
    void next(std::int32_t* tokens) override {
        std::vector<std::int32_t> scratch(elems_);
        while (mode_ == Mode::Drop && its_.count(done_ / per_ + 1)) {
            walk_.next(scratch.data());
            ++done_;
        }
        const bool replace = mode_ == Mode::Replace && its_.count(done_ / per_ + 1);
        walk_.next(tokens);
        ++done_;
        if (replace)
            for (std::size_t i = 0; i < elems_; ++i) {
                rng_ = rng_ * 6364136223846793005ULL + 1442695040888963407ULL;
                tokens[i] = static_cast<std::int32_t>((rng_ >> 33) % static_cast<std::uint64_t>(vocab_));
            }
    }

private:
    test::WalkSource walk_;
    std::size_t elems_;
    int vocab_;
    std::int64_t per_;
    std::set<std::int64_t> its_;
    Mode mode_;
    std::int64_t done_ = 0;
    std::uint64_t rng_ = 12345;
};

Config spiky_config() {
    Config cfg = test::tiny::train();
    cfg.monitor.check_for_spiky_loss = true;
    cfg.monitor.spiky_loss_window = 8;
    cfg.monitor.spiky_loss_max_consecutive = 3;
    return cfg;
}

std::vector<float> params_of(Trainer& tr) {
    std::vector<float> p(static_cast<std::size_t>(tr.chunks().chunk(0).layout().total_elements()));
    tr.chunks().chunk(0).get_parameters(p.data());
    return p;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A planted spike at iteration 32 is skipped: the parameters stay bit for bit, and the run
// goes on exactly as a run that never saw that batch (same LR schedule, Adam steps, data).
TEST(SpikyLoss, SkippedStepLeavesParametersAndTheRunContinuesAsWithoutTheBatch) {
    const Config cfg = spiky_config();
    dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
    auto be = make_backend("cpu", 0);
    Trainer a(cfg, groups, *be);
    PlantedSource spiky(cfg, groups, a.num_micro_batches(), {32}, PlantedSource::Mode::Replace);
    std::vector<float> before;
    for (int it = 1; it <= 40; ++it) {
        if (it == 32) before = params_of(a);
        const IterationRecord r = a.train_step(spiky);
        EXPECT_EQ(r.spiky, it == 32) << "iteration " << it << " loss " << r.lm_loss;
        if (it == 32) {
            EXPECT_TRUE(r.skipped);
            EXPECT_TRUE(same_bits(params_of(a), before)) << "the skipped step changed the parameters";
        }
    }
    EXPECT_EQ(a.spiky_iterations(), 1);
    EXPECT_EQ(a.skipped_iterations(), 1);
    EXPECT_EQ(a.consumed_train_samples(), 40 * cfg.training.global_batch_size);

    auto be2 = make_backend("cpu", 0);
    Trainer c(cfg, groups, *be2);
    PlantedSource dropped(cfg, groups, c.num_micro_batches(), {32}, PlantedSource::Mode::Drop);
    for (int it = 1; it <= 39; ++it) EXPECT_FALSE(c.train_step(dropped).skipped);
    EXPECT_TRUE(same_bits(params_of(a), params_of(c)));
}

TEST(SpikyLoss, ConsecutiveSpikesStopTheRun) {
    const Config cfg = spiky_config();
    dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
    auto be = make_backend("cpu", 0);
    Trainer tr(cfg, groups, *be);
    PlantedSource src(cfg, groups, tr.num_micro_batches(), {32, 33, 34}, PlantedSource::Mode::Replace);
    for (int it = 1; it <= 33; ++it) tr.train_step(src);
    try {
        tr.train_step(src);
        FAIL() << "three spikes in a row passed";
    } catch (const NumericError& e) {
        EXPECT_TRUE(contains(e.what(), "3 spiky losses in a row")) << e.what();
        EXPECT_TRUE(contains(e.what(), "iteration 34")) << e.what();
        EXPECT_TRUE(contains(e.what(), "last good checkpoint: none")) << e.what();
    }
}

// A NaN in one rank's gradient after the reduction: every rank gets the same report, which
// names that rank, its host and the parameter.
TEST(NanCheck, GradientReportNamesTheRankAndTheParameter) {
    const Config cfg = test::tiny::train();
    dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
    auto be = make_backend("cpu", 0);
    Trainer tr(cfg, groups, *be);
    test::WalkSource src(cfg.model.vocab_size, cfg.model.seq_length, cfg.training.micro_batch_size,
                         groups.coords().dp, groups.grid().dp_size());
    tr.chunks().forward_backward(src, 1.0, 0, tr.num_micro_batches());
    const auto hosts = gather_hostnames(groups.world());
    EXPECT_EQ(tr.chunks().first_non_finite_grad(), "");
    const int bad = groups.world_size() - 1;
    const auto& entries = tr.chunks().chunk(0).layout().entries();
    const model::ParamEntry& e = entries.at(entries.size() / 2);
    if (groups.rank() == bad) {
        const float inf = std::numeric_limits<float>::infinity();
        be->copy_to_device(tr.chunks().chunk(0).grads() + e.offset + e.numel - 1, &inf, sizeof inf);
    }
    const std::string msg = non_finite_grad_report(tr.chunks(), 7, groups, hosts);
    EXPECT_TRUE(contains(msg, "gradient of " + e.name + " is not finite")) << msg;
    EXPECT_TRUE(contains(msg, "iteration 7 on rank " + std::to_string(bad) + " (host " + hosts[bad] + ")")) << msg;
    EXPECT_TRUE(contains(msg, "--no-check-for-nan-in-loss-and-grad")) << msg;
}

// Fault injection: a NaN written into one rank's local gradient of `name` (chunk 0) in the
// iterations the returned flag allows, just before the bucket holding it is checked and
// reduced - where a real one would have come from that rank's backward.
std::shared_ptr<bool> plant_local_nan(Trainer& tr, Backend& be, const model::ParamEntry& e, bool on_this_rank) {
    auto armed = std::make_shared<bool>(false);
    if (!on_this_rank) return armed;
    tr.chunks().set_before_reduce_hook(0, [&be, e, armed](float* g, const GradBucket& b) {
        if (!*armed || e.offset < b.begin || e.offset >= b.end) return;
        const float nan = std::numeric_limits<float>::quiet_NaN();
        be.copy_to_device(g + e.offset, &nan, sizeof nan);
    });
    return armed;
}

void expect_local_nan_report(Trainer& tr, test::WalkSource& src, const std::string& name, int bad,
                             const std::vector<std::string>& hosts, const std::shared_ptr<bool>& armed,
                             const std::string& layout) {
    try {
        tr.train_step(src);
        ADD_FAILURE() << layout << ": a NaN gradient passed the check";
    } catch (const NumericError& e) {
        const std::string msg = e.what();
        EXPECT_TRUE(contains(msg, "gradient of " + name + " is not finite (NaN or Inf) at iteration 2 on rank " +
                                      std::to_string(bad) + " (host " + hosts[static_cast<std::size_t>(bad)] +
                                      "), in its local gradient before the data-parallel reduction"))
            << layout << ": " << msg;
    }
    *armed = false;
}

// A NaN that arises in the highest rank's local gradient is reported as that rank's, with
// that parameter, in every data-parallel layout: all-reduce or the distributed optimizer's
// reduce-scatter, buckets launched during backward (--overlap-grad-reduce) or after it.
// The parameter lies in rank 0's shard, so a check after the reduction would name rank 0.
TEST(NanCheck, NamesTheRankWhereALocalGradientWentBadBeforeTheReduction) {
    for (const bool distributed : {false, true})
        for (const bool overlap : {false, true}) {
            Config cfg = test::tiny::train();
            cfg.parallel.use_distributed_optimizer = distributed;
            cfg.parallel.overlap_grad_reduce = overlap;
            cfg.parallel.ddp_bucket_size = 4000;  // several buckets
            dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
            auto be = make_backend("cpu", 0);
            Trainer tr(cfg, groups, *be);
            const std::string layout = std::string(distributed ? "distributed optimizer" : "all-reduce") +
                                       (overlap ? ", overlapped" : "");
            ASSERT_GT(tr.chunks().grad_reducer(0).buckets().size(), 2u) << layout;
            const auto& entries = tr.chunks().chunk(0).layout().entries();
            const std::int64_t half = tr.chunks().chunk(0).padded_elements() / 2;
            const model::ParamEntry* e = nullptr;
            for (const auto& x : entries)
                if (x.offset > 0 && x.offset + x.numel <= half) e = &x;  // the last wholly in shard 0
            ASSERT_NE(e, nullptr);
            const int bad = groups.world_size() - 1;
            const auto hosts = gather_hostnames(groups.world());
            auto armed = plant_local_nan(tr, *be, *e, groups.rank() == bad);
            test::WalkSource src(cfg.model.vocab_size, cfg.model.seq_length, cfg.training.micro_batch_size,
                                 groups.coords().dp, groups.grid().dp_size());
            tr.train_step(src);  // clean
            EXPECT_EQ(tr.chunks().local_non_finite_grad(), "") << layout;
            *armed = true;
            expect_local_nan_report(tr, src, e->name, bad, hosts, armed, layout);
        }
}

// Pipelined (PP 2 on 2 ranks): the last stage's copy of the tied word embeddings goes bad
// on rank 1; the embedding-group sum would carry it to rank 0's word embeddings, so the
// held-back bucket is checked before that sum.
TEST(NanCheck, NamesTheStageWhereATiedEmbeddingGradientWentBad) {
    int world = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world != 2) GTEST_SKIP() << "needs 2 ranks (pipeline 2); the np2 run of this test runs it";
    Config cfg = test::tiny::train();
    dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 2);
    auto be = make_backend("cpu", 0);
    Trainer tr(cfg, groups, *be);
    const auto hosts = gather_hostnames(groups.world());
    const char* head = model::ParamLayout::word_embeddings_for_head();
    const model::ParamEntry* e = tr.chunks().chunk(0).layout().find(head);
    ASSERT_EQ(e != nullptr, groups.rank() == 1);
    // Injected when backward is done, before finalize_grads: independent of where the
    // check sits, so a check moved after the embedding-group sum finds rank 0 bad too.
    auto armed = std::make_shared<bool>(false);
    if (e)
        tr.chunks().set_grads_done_hook([&tr, &be, off = e->offset, armed] {
            if (!*armed) return;
            const float nan = std::numeric_limits<float>::quiet_NaN();
            be->copy_to_device(tr.chunks().chunk(0).grads() + off, &nan, sizeof nan);
        });
    test::WalkSource src(cfg.model.vocab_size, cfg.model.seq_length, cfg.training.micro_batch_size,
                         groups.coords().dp, groups.grid().dp_size());
    tr.train_step(src);
    *armed = true;
    expect_local_nan_report(tr, src, head, 1, hosts, armed, "pipeline 2");
}

// The trainer stops on a NaN loss naming the rank; with the check off it skips the step
// (the parameters are not touched) and goes on.
TEST(NanCheck, NanLossStopsUnlessTheCheckIsOff) {
    for (const bool check : {true, false}) {
        Config cfg = test::tiny::train();
        cfg.monitor.no_check_for_nan_in_loss_and_grad = !check;
        dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
        auto be = make_backend("cpu", 0);
        Trainer tr(cfg, groups, *be);
        test::WalkSource src(cfg.model.vocab_size, cfg.model.seq_length, cfg.training.micro_batch_size,
                             groups.coords().dp, groups.grid().dp_size());
        tr.train_step(src);
        std::vector<float> p = params_of(tr);
        for (float& x : p) x = std::numeric_limits<float>::quiet_NaN();
        tr.chunks().chunk(0).set_parameters(p.data());
        if (check) {
            try {
                tr.train_step(src);
                ADD_FAILURE() << "a NaN loss passed the check";
            } catch (const NumericError& e) {
                EXPECT_TRUE(contains(e.what(), "lm loss is NaN at iteration 2 on rank 0 (host ")) << e.what();
            }
        } else {
            const IterationRecord r = tr.train_step(src);
            EXPECT_TRUE(std::isnan(r.lm_loss));
            EXPECT_TRUE(r.skipped);
            EXPECT_TRUE(same_bits(params_of(tr), p));
        }
    }
}

TEST(Profile, RejectedOnTheCpuBackend) {
    Config cfg = test::tiny::train();
    cfg.monitor.profile = true;
    dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
    auto be = make_backend("cpu", 0);
    try {
        Trainer tr(cfg, groups, *be);
        FAIL() << "--profile accepted on the CPU backend";
    } catch (const UsageError& e) {
        EXPECT_TRUE(contains(e.what(), "--profile starts and stops the CUDA profiler")) << e.what();
    }
}

}  // namespace
}  // namespace gpt::train
