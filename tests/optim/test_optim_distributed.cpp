// The distributed optimizer (ZeRO-1 over data parallelism) against the plain optimizer
// stepping the data-parallel sum of the gradients: the same params on every rank, the same
// norm and skip decisions, a global overflow check, and 12/d optimizer bytes per parameter.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <limits>
#include <random>

#include "model_test_util.hpp"
#include "core/errors.hpp"
#include "optim/adam.hpp"

namespace gpt::optim {
namespace {

std::unique_ptr<dist::Communicator> world_comm(const char* name) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    return std::make_unique<dist::MpiCommunicator>(c, name);
}

int world_size() {
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

model::ModelDims tiny_dims() { return model::make_model_dims(test::tiny::model(), 50, 1, 0); }
const model::ChunkSpec kChunk{0, 2, true, true};

std::unique_ptr<model::GptModel> make_model(Backend& be, dist::Communicator& tp, DType dtype,
                                            std::int64_t buffer_multiple) {
    model::ModelOptions opt;
    opt.dtype = dtype;
    auto m = std::make_unique<model::GptModel>(tiny_dims(), kChunk, opt, 1, be, tp, 1, buffer_multiple);
    m->init_parameters();
    return m;
}

// DP rank r's synthetic (scaled) gradients at step s over the padded buffer; zero padding.
std::vector<float> rank_grads(const model::GptModel& m, int r, int s, float stddev) {
    std::vector<float> g(static_cast<std::size_t>(m.padded_elements()), 0.0f);
    std::mt19937 rng(static_cast<unsigned>(1000 * s + r));
    std::normal_distribution<float> n(0.0f, stddev);
    for (const auto& e : m.layout().entries())
        for (std::int64_t i = 0; i < e.numel; ++i) g[static_cast<std::size_t>(e.offset + i)] = n(rng);
    return g;
}

// The data-parallel sum every rank's trainer would reduce-scatter, computed on every rank
// in one fixed order so all ranks and the reference see the same fp32 values.
std::vector<float> summed_grads(const model::GptModel& m, int d, int s, float stddev) {
    std::vector<float> sum(static_cast<std::size_t>(m.padded_elements()), 0.0f);
    for (int r = 0; r < d; ++r) {
        const auto g = rank_grads(m, r, s, stddev);
        for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += g[i];
    }
    return sum;
}

// Puts the summed grads into a sharded model: its own shard only, NaN elsewhere (the
// contract says the rest of the buffer is garbage the optimizer must not read).
void put_shard(Backend& be, model::GptModel& m, const AdamOptimizer& o, std::vector<float> g) {
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(g.size()); ++i)
        if (i < o.shard_begin() || i >= o.shard_begin() + o.shard_size())
            g[static_cast<std::size_t>(i)] = std::numeric_limits<float>::quiet_NaN();
    be.copy_to_device(m.grads(), g.data(), g.size() * sizeof(float));
}

std::vector<float> host_params(const model::GptModel& m) {
    std::vector<float> p(static_cast<std::size_t>(m.layout().total_elements()));
    m.get_parameters(p.data());
    return p;
}

std::vector<float> host_floats(Backend& be, const float* p, std::int64_t n) {
    std::vector<float> h(static_cast<std::size_t>(n));
    be.copy_to_host(h.data(), p, h.size() * sizeof(float));
    return h;
}

TEST(DistributedOptimizer, ShardsAndMatchesTheReplicatedOptimizer) {
    const int d = world_size();
    auto be = make_backend("cpu", 0);
    auto tp = test::self_comm("tp");
    auto self_mp = test::self_comm("mp");
    auto dp = world_comm("dp");
    auto world = world_comm("world");  // model-parallel (1 rank) x dp
    for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
        SCOPED_TRACE(dtype_name(dtype));
        OptimizerConfig cfg;
        cfg.weight_decay = 0.1;
        cfg.clip_grad = 1.0;
        const std::int64_t multiple = d * model::ParamLayout::kAlign;
        auto ref_model = make_model(*be, *tp, dtype, multiple);
        auto model = make_model(*be, *tp, dtype, multiple);
        AdamOptimizer ref(cfg, *ref_model, *self_mp);
        AdamOptimizer opt(cfg, *model, *world, dp.get());

        const std::int64_t P = model->padded_elements(), total = model->layout().total_elements();
        ASSERT_EQ(P % d, 0);
        EXPECT_TRUE(opt.distributed());
        EXPECT_FALSE(ref.distributed());
        EXPECT_EQ(opt.shard_size(), P / d);
        EXPECT_EQ(opt.shard_begin(), dp->rank() * (P / d));
        EXPECT_EQ(ref.shard_begin(), 0);
        EXPECT_EQ(ref.shard_size(), total);
        EXPECT_EQ(&opt.norm_group(), world.get());
        if (dtype == DType::F32) {
            EXPECT_EQ(opt.main_params(), static_cast<float*>(model->params()) + opt.shard_begin());
        }

        const double scale = dtype == DType::F16 ? 1024.0 : dtype == DType::F32 ? 256.0 : 1.0;
        dp->reset_stats();
        for (int s = 1; s <= 3; ++s) {
            SCOPED_TRACE(s);
            const auto g = summed_grads(*model, d, s, 0.5f * static_cast<float>(scale));
            be->copy_to_device(ref_model->grads(), g.data(), g.size() * sizeof(float));
            put_shard(*be, *model, opt, g);
            const double lr = 1e-2 / s;
            const StepResult want = ref.step(lr, scale);
            const StepResult got = opt.step(lr, scale);
            ASSERT_FALSE(want.skipped);
            ASSERT_LT(cfg.clip_grad, want.grad.norm);  // clipping is active
            EXPECT_EQ(got.skipped, want.skipped);
            EXPECT_EQ(got.grad.finite, want.grad.finite);
            EXPECT_NEAR(got.grad.norm, want.grad.norm, 1e-9 * want.grad.norm);

            const auto pw = host_params(*ref_model), pg = host_params(*model);
            if (dtype == DType::F32) {
                double worst = 0.0;
                for (std::size_t i = 0; i < pw.size(); ++i)
                    worst = std::max(worst, std::abs(double(pg[i]) - pw[i]) / (std::abs(pw[i]) + 1e-6));
                EXPECT_LE(worst, 1e-6);
            } else {
                EXPECT_EQ(pg, pw);  // every rank's gathered half model
            }
            // This rank's optimizer state is the reference's over its shard.
            const std::int64_t n = std::min(opt.shard_size(), std::max<std::int64_t>(0, total - opt.shard_begin()));
            const auto mw = host_floats(*be, ref.main_params() + opt.shard_begin(), n);
            const auto mg = host_floats(*be, opt.main_params(), n);
            const auto vw = host_floats(*be, ref.exp_avg_sq() + opt.shard_begin(), n);
            const auto vg = host_floats(*be, opt.exp_avg_sq(), n);
            for (std::int64_t i = 0; i < n; ++i) {
                const auto k = static_cast<std::size_t>(i);
                ASSERT_NEAR(mg[k], mw[k], 1e-6 * std::abs(mw[k]) + 1e-12) << "main " << i;
                ASSERT_NEAR(vg[k], vw[k], 1e-5 * std::abs(vw[k]) + 1e-20) << "exp_avg_sq " << i;
            }
        }
        EXPECT_EQ(opt.steps(), 3);
        EXPECT_EQ(dp->stats().calls[static_cast<int>(dist::CommOp::AllGather)], 3u);
        EXPECT_EQ(dp->stats().bytes[static_cast<int>(dist::CommOp::AllGather)],
                  3u * static_cast<std::uint64_t>(P) * dtype_size(dtype));  // the gathered model
        // Checkpoint load: main shards set, the model's params rebuilt from them.
        {
            const auto want = host_params(*model);
            std::vector<float> wiped(want.size(), 0.0f);
            if (dtype == DType::F32)  // main params are the model's own shard
                for (std::int64_t i = opt.shard_begin(); i < std::min(total, opt.shard_begin() + opt.shard_size()); ++i)
                    wiped[static_cast<std::size_t>(i)] = want[static_cast<std::size_t>(i)];
            model->set_parameters(wiped.data());
            opt.publish_main_params();
            EXPECT_EQ(host_params(*model), want);
        }
        // train::ModelChunks::step's path: shares summed over chunks, reduced over norm_group().
        const auto g = summed_grads(*model, d, 9, 1.0f);
        put_shard(*be, *model, opt, g);
        be->copy_to_device(ref_model->grads(), g.data(), g.size() * sizeof(float));
        auto stats = opt.local_grad_stats();
        opt.norm_group().all_reduce(stats.data(), 2, dist::CommType::F64, dist::ReduceOp::Sum);
        EXPECT_NEAR(AdamOptimizer::finish_grad_norm(stats, 1.0).norm, ref.grad_norm(1.0).norm,
                    1e-9 * ref.grad_norm(1.0).norm);
    }
}

TEST(DistributedOptimizer, OverflowInOneRanksShardSkipsEveryRank) {
    const int d = world_size();
    auto be = make_backend("cpu", 0);
    auto tp = test::self_comm("tp");
    auto dp = world_comm("dp");
    auto world = world_comm("world");
    for (DType dtype : {DType::F32, DType::F16}) {
        SCOPED_TRACE(dtype_name(dtype));
        auto model = make_model(*be, *tp, dtype, d * model::ParamLayout::kAlign);
        AdamOptimizer opt(OptimizerConfig{}, *model, *world, dp.get());
        const auto before = host_params(*model);
        auto g = summed_grads(*model, d, 1, 1.0f);
        // Only the last rank sees an inf, inside its own shard.
        const std::int64_t bad = (d - 1) * opt.shard_size() + 1;
        ASSERT_LT(bad, model->layout().total_elements());
        if (dp->rank() == d - 1) g[static_cast<std::size_t>(bad)] = std::numeric_limits<float>::infinity();
        put_shard(*be, *model, opt, g);
        dp->reset_stats();
        const StepResult r = opt.step(1e-3, 1.0);
        EXPECT_TRUE(r.skipped);
        EXPECT_FALSE(r.grad.finite);
        EXPECT_EQ(opt.steps(), 0);
        EXPECT_EQ(dp->stats().calls[static_cast<int>(dist::CommOp::AllGather)], 0u);
        EXPECT_EQ(host_params(*model), before);
        // The next finite step updates every rank's whole model.
        put_shard(*be, *model, opt, summed_grads(*model, d, 2, 1.0f));
        EXPECT_FALSE(opt.step(1e-3, 1.0).skipped);
        EXPECT_EQ(opt.steps(), 1);
        const auto after = host_params(*model);
        EXPECT_NE(after, before);
        std::vector<float> first(after.size());
        if (dp->rank() == 0) first = after;
        dp->broadcast(first.data(), static_cast<std::int64_t>(first.size()), dist::CommType::F32, 0);
        EXPECT_EQ(after, first);
    }
}

// Megatron's distributed-optimizer accounting: half params (2) + fp32 grads (4) per
// parameter on every rank, fp32 main params + two moments (12) split over d ranks.
TEST(DistributedOptimizer, MemoryIsSixPlusTwelveOverDBytesPerParameter) {
    const int n = world_size();
    auto be = make_backend("cpu", 0);
    auto tp = test::self_comm("tp");
    auto world = world_comm("world");
    for (int d : {1, 2, 4}) {
        if (n % d != 0) continue;
        SCOPED_TRACE(d);
        int rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm c;
        MPI_Comm_split(MPI_COMM_WORLD, rank / d, rank, &c);
        dist::MpiCommunicator dp(c, "dp");
        ASSERT_EQ(dp.size(), d);
        for (DType dtype : {DType::F16, DType::BF16}) {
            auto model = make_model(*be, *tp, dtype, d * model::ParamLayout::kAlign);
            AdamOptimizer opt(OptimizerConfig{}, *model, *world, &dp);
            EXPECT_EQ(opt.distributed(), d > 1);
            const auto P = static_cast<std::size_t>(model->padded_elements());
            // Unsharded, the optimizer covers the layout's elements: the same count here.
            if (d == 1) {
                ASSERT_EQ(P, static_cast<std::size_t>(model->layout().total_elements()));
            }
            const OptimizerMemory om = opt.memory();
            EXPECT_EQ(om.main_params, 4 * P / d);
            EXPECT_EQ(om.moments, 8 * P / d);
            EXPECT_EQ(om.main_params + om.moments, 12 * P / d);
            const model::ModelMemory mm = model->memory();
            EXPECT_EQ(mm.params + mm.grads, 6 * P);
            const double per_param =
                static_cast<double>(mm.params + mm.grads + om.main_params + om.moments) / static_cast<double>(P);
            EXPECT_DOUBLE_EQ(per_param, 6.0 + 12.0 / d);
        }
    }
}

TEST(DistributedOptimizer, RejectsABufferThatDoesNotSplitOverDataParallelRanks) {
    auto be = make_backend("cpu", 0);
    auto tp = test::self_comm("tp");
    auto dp = world_comm("dp");
    auto world = world_comm("world");
    // The layout is 64-aligned; a buffer_multiple of total + 1 makes the padded size odd.
    const model::ParamLayout layout(tiny_dims(), kChunk);
    auto model = make_model(*be, *tp, DType::F16, layout.total_elements() + 1);
    ASSERT_NE(model->padded_elements() % dp->size(), 0);
    EXPECT_THROW(AdamOptimizer(OptimizerConfig{}, *model, *world, dp.get()), InternalError);
    // Not sharded (no DP group): any size is fine.
    EXPECT_NO_THROW(AdamOptimizer(OptimizerConfig{}, *model, *world, nullptr));
}

}  // namespace
}  // namespace gpt::optim
