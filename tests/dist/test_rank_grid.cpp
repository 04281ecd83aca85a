#include <gtest/gtest.h>

#include <set>

#include "core/errors.hpp"
#include "dist/rank_grid.hpp"

using namespace gpt;
using namespace gpt::dist;

// Every (world, tp, pp) with world <= 16: the mapping is a bijection, follows Megatron's
// order, and every group has the right size, members and disjointness.
TEST(RankGrid, EveryLayoutUpTo16Ranks) {
    int layouts = 0;
    for (int world = 1; world <= 16; ++world)
        for (int tp = 1; tp <= world; ++tp)
            for (int pp = 1; pp <= world; ++pp) {
                if (world % (tp * pp) != 0) {
                    EXPECT_THROW(RankGrid(world, tp, pp), UsageError);
                    continue;
                }
                ++layouts;
                RankGrid g(world, tp, pp);
                const int dp = world / (tp * pp);
                ASSERT_EQ(g.dp_size(), dp);
                std::set<int> seen;
                for (int r = 0; r < world; ++r) {
                    RankCoords c = g.coords(r);
                    EXPECT_EQ(r, c.tp + tp * (c.dp + dp * c.pp));
                    EXPECT_EQ(g.rank(c), r);
                    seen.insert(r);
                    auto tpg = g.tp_group(r), dpg = g.dp_group(r), ppg = g.pp_group(r);
                    ASSERT_EQ((int)tpg.size(), tp);
                    ASSERT_EQ((int)dpg.size(), dp);
                    ASSERT_EQ((int)ppg.size(), pp);
                    for (int m : tpg) {
                        EXPECT_EQ(g.coords(m).dp, c.dp);
                        EXPECT_EQ(g.coords(m).pp, c.pp);
                    }
                    for (int m : dpg) {
                        EXPECT_EQ(g.coords(m).tp, c.tp);
                        EXPECT_EQ(g.coords(m).pp, c.pp);
                    }
                    for (int m : ppg) {
                        EXPECT_EQ(g.coords(m).tp, c.tp);
                        EXPECT_EQ(g.coords(m).dp, c.dp);
                    }
                    // Tensor-parallel peers are consecutive ranks (they share a node).
                    EXPECT_EQ(tpg.back() - tpg.front(), tp - 1);
                    auto mp = g.model_parallel_group(r);
                    ASSERT_EQ((int)mp.size(), tp * pp);
                    for (int m : mp) EXPECT_EQ(g.coords(m).dp, c.dp);
                    auto emb = g.embedding_group(r);
                    ASSERT_EQ((int)emb.size(), pp > 1 ? 2 : 1);
                    EXPECT_EQ(g.coords(emb.front()).pp, 0);
                    EXPECT_EQ(g.coords(emb.back()).pp, pp - 1);
                }
                EXPECT_EQ((int)seen.size(), world);
            }
    EXPECT_GT(layouts, 40);
}

TEST(RankGrid, MegatronExample16Ranks) {
    // Megatron's docstring: 16 GPUs, TP 2, PP 4 -> DP 2; tensor groups [g0,g1], ...
    RankGrid g(16, 2, 4);
    EXPECT_EQ(g.dp_size(), 2);
    EXPECT_EQ(g.tp_group(5), (std::vector<int>{4, 5}));
    EXPECT_EQ(g.dp_group(0), (std::vector<int>{0, 2}));
    EXPECT_EQ(g.pp_group(0), (std::vector<int>{0, 4, 8, 12}));
    EXPECT_EQ(g.pp_group(3), (std::vector<int>{3, 7, 11, 15}));
    EXPECT_EQ(g.embedding_group(1), (std::vector<int>{1, 13}));
}

TEST(RankGrid, ErrorNamesTheNumbers) {
    try {
        RankGrid(6, 4, 1);
        FAIL() << "expected UsageError";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("world size 6"), std::string::npos) << e.what();
    }
}
