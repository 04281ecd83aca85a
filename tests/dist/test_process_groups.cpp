#include <gtest/gtest.h>

#include "test_env.hpp"
#include <mpi.h>

#include <numeric>
#include <vector>

#include "core/half.hpp"
#include "dist/process_groups.hpp"

using namespace gpt::dist;

using gpt::test::world_rank;
using gpt::test::world_size;

// For every layout of the current world: each communicator's members match RankGrid and a
// sum over the group equals the sum of the members' global ranks.
TEST(ProcessGroups, GroupsMatchRankGridForEveryLayout) {
    const int world = world_size(), me = world_rank();
    for (int tp = 1; tp <= world; ++tp)
        for (int pp = 1; pp <= world; ++pp) {
            if (world % (tp * pp)) continue;
            ProcessGroups g(MPI_COMM_WORLD, tp, pp);
            const RankGrid& grid = g.grid();
            EXPECT_EQ(g.rank(), me);
            auto check = [&](Communicator& c, const std::vector<int>& members) {
                ASSERT_EQ(c.size(), (int)members.size()) << c.name();
                std::int64_t v = me;
                c.all_reduce(&v, 1, CommType::I64, ReduceOp::Sum);
                EXPECT_EQ(v, std::accumulate(members.begin(), members.end(), std::int64_t{0}))
                    << c.name() << " tp=" << tp << " pp=" << pp;
            };
            check(g.tp(), grid.tp_group(me));
            check(g.dp(), grid.dp_group(me));
            check(g.pp(), grid.pp_group(me));
            check(g.model_parallel(), grid.model_parallel_group(me));
            const auto emb = grid.embedding_group(me);
            const bool member = std::find(emb.begin(), emb.end(), me) != emb.end();
            check(g.embedding(), member ? emb : std::vector<int>{me});
            EXPECT_EQ(g.local_size(), world);  // one node in tests
            EXPECT_EQ(g.local_rank(), me);
        }
}

TEST(Communicator, CollectivesAndByteCounts) {
    ProcessGroups g(MPI_COMM_WORLD, 1, 1);
    Communicator& c = g.world();
    const int n = c.size(), r = c.rank();
    c.reset_stats();

    std::vector<float> x(5, float(r + 1));
    c.all_reduce(x.data(), 5, CommType::F32, ReduceOp::Sum);
    for (float v : x) EXPECT_FLOAT_EQ(v, n * (n + 1) / 2.0f);
    float mx = float(r);
    c.all_reduce(&mx, 1, CommType::F32, ReduceOp::Max);
    EXPECT_EQ(mx, float(n - 1));

    std::vector<std::int32_t> mine{r, 10 * r}, all(2 * n);
    c.all_gather(mine.data(), all.data(), 2, CommType::I32);
    for (int i = 0; i < n; ++i) {
        EXPECT_EQ(all[2 * i], i);
        EXPECT_EQ(all[2 * i + 1], 10 * i);
    }

    std::vector<double> send(3 * n), recv(3);
    for (int i = 0; i < 3 * n; ++i) send[i] = i + r;
    c.reduce_scatter(send.data(), recv.data(), 3, CommType::F64, ReduceOp::Sum);
    for (int j = 0; j < 3; ++j)
        EXPECT_DOUBLE_EQ(recv[j], n * double(3 * r + j) + n * (n - 1) / 2.0);

    std::int64_t b = r == 0 ? 42 : -1;
    c.broadcast(&b, 1, CommType::I64, 0);
    EXPECT_EQ(b, 42);

    if (n > 1) {
        float token = float(r);
        if (r == 0) c.send(&token, 1, CommType::F32, 1, 7);
        if (r == 1) {
            c.recv(&token, 1, CommType::F32, 0, 7);
            EXPECT_EQ(token, 0.0f);
        }
    }
    c.barrier();

    const auto& s = c.stats();
    EXPECT_EQ(s.bytes[(int)CommOp::AllReduce], 5 * 4u + 4u);
    EXPECT_EQ(s.bytes[(int)CommOp::AllGather], 2u * 4u * n);
    EXPECT_EQ(s.bytes[(int)CommOp::ReduceScatter], 3u * 8u * n);
    EXPECT_EQ(s.bytes[(int)CommOp::Broadcast], 8u);
    EXPECT_EQ(s.calls[(int)CommOp::AllReduce], 2u);
}

TEST(Communicator, HalfPrecisionSumAndMax) {
    ProcessGroups g(MPI_COMM_WORLD, 1, 1);
    Communicator& c = g.world();
    const int n = c.size(), r = c.rank();
    std::vector<std::uint16_t> h{gpt::float_to_half_bits(0.5f * (r + 1)), gpt::float_to_half_bits(-1.0f)};
    c.all_reduce(h.data(), 2, CommType::F16, ReduceOp::Sum);
    EXPECT_FLOAT_EQ(gpt::half_bits_to_float(h[0]), 0.5f * n * (n + 1) / 2);
    EXPECT_FLOAT_EQ(gpt::half_bits_to_float(h[1]), -1.0f * n);
    std::uint16_t bm = gpt::float_to_bf16_bits(float(r) - 3.0f);
    c.all_reduce(&bm, 1, CommType::BF16, ReduceOp::Max);
    EXPECT_FLOAT_EQ(gpt::bf16_bits_to_float(bm), float(n - 1) - 3.0f);
}
