// The search: constraints kept, rejections with reasons, ranking, gpt22b on 2 x 8 H100.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "plan/search.hpp"
#include "plan_fixtures.hpp"

namespace gpt::plan::test {
namespace {

bool any_reason(const SearchResult& r, const std::string& needle) {
    for (const auto& j : r.rejected)
        if (j.reason.find(needle) != std::string::npos) return true;
    return false;
}

TEST(Search, Gpt22bOnTwoH100Nodes) {
    SearchInputs in = inputs(gpt22b(), "h100-80gb", 16, 8, 80);
    in.max_global_batch = 32;
    SearchResult r = search_layouts(in);
    ASSERT_FALSE(r.feasible.empty());
    const Candidate& best = r.feasible.front();
    // 22B x 18 bytes = 397 GB cannot live on fewer than 8 GPUs' worth of model parallelism
    // with activations; TP stays inside a node; the batch uses the limit.
    EXPECT_GE(best.layout.tp * best.layout.pp, 8);
    EXPECT_LE(best.layout.tp, 8);
    EXPECT_EQ(best.layout.global_batch, 32);
    EXPECT_LE(best.memory.total(), 80.0 * (1ull << 30));
    EXPECT_GT(best.mfu, 0.25);
    EXPECT_LT(best.mfu, 0.65);
    for (const Candidate& c : r.feasible) {
        EXPECT_LE(c.layout.global_batch, 32);
        EXPECT_EQ(c.layout.global_batch % (c.layout.micro_batch * c.layout.dp), 0);
        EXPECT_EQ(c.layout.world(), 16);
        EXPECT_LE(c.layout.tp, 8);
        EXPECT_LE(c.tokens_per_second, best.tokens_per_second);
    }
    // TP 16 would cross the two nodes; TP x PP = 1 cannot hold 22B.
    EXPECT_TRUE(any_reason(r, "spans nodes"));
    EXPECT_TRUE(any_reason(r, "out of memory by"));
}

TEST(Search, KeepsUserConstraints) {
    SearchInputs in = inputs(gpt22b(), "h100-80gb", 16, 8, 80);
    in.max_global_batch = 32;
    in.tp = 4;
    in.micro_batch = 2;
    in.recompute = Recompute::Full;
    SearchResult r = search_layouts(in);
    ASSERT_FALSE(r.feasible.empty());
    for (const Candidate& c : r.feasible) {
        EXPECT_EQ(c.layout.tp, 4);
        EXPECT_EQ(c.layout.micro_batch, 2);
        EXPECT_EQ(c.layout.recompute, Recompute::Full);
    }
    SearchInputs exact = inputs(gpt22b(), "h100-80gb", 16, 8, 80);
    exact.global_batch = 24;
    exact.pp = 2;
    exact.require_distributed_optimizer = true;
    exact.require_sequence_parallel = true;
    SearchResult e = search_layouts(exact);
    ASSERT_FALSE(e.feasible.empty());
    for (const Candidate& c : e.feasible) {
        EXPECT_EQ(c.layout.global_batch, 24);
        EXPECT_EQ(c.layout.pp, 2);
        EXPECT_TRUE(c.layout.distributed_optimizer);
        EXPECT_TRUE(c.layout.sequence_parallel || c.layout.tp == 1);
    }
    // A user-given TP across nodes is kept (and priced over the inter-node fabric).
    SearchInputs across = inputs(gpt22b(), "h100-80gb", 16, 8, 80);
    across.max_global_batch = 32;
    across.tp = 16;
    SearchResult a = search_layouts(across);
    ASSERT_FALSE(a.feasible.empty());
    EXPECT_TRUE(a.feasible.front().placement.tp_crosses_nodes);
}

TEST(Search, RejectsWithReasons) {
    // 12 heads: TP 8 impossible; 10 layers: PP 4 impossible.
    SearchInputs in = inputs(gpt(10, 768, 12, 1024), "a100-40gb", 8, 8, 40);
    in.max_global_batch = 64;
    SearchResult r = search_layouts(in);
    EXPECT_TRUE(any_reason(r, "attention heads 12 not divisible by TP 8"));
    EXPECT_TRUE(any_reason(r, "10 layers not divisible by PP 4"));
    EXPECT_FALSE(r.feasible.empty());
    // Tiny memory: nothing fits, every rejection says by how much.
    SearchInputs small = inputs(gpt22b(), "a100-40gb", 8, 8, 16);
    small.max_global_batch = 8;
    SearchResult s = search_layouts(small);
    EXPECT_TRUE(s.feasible.empty());
    EXPECT_TRUE(any_reason(s, "out of memory by"));
    // A batch smaller than DP x micro-batch.
    SearchInputs batch = inputs(gpt(4, 256, 4, 128), "a100-40gb", 8, 8, 40);
    batch.global_batch = 4;
    batch.tp = 1;
    batch.pp = 1;
    SearchResult b = search_layouts(batch);
    EXPECT_TRUE(b.feasible.empty());
    EXPECT_TRUE(any_reason(b, "not divisible by micro-batch x DP"));
}

// A batch schedule (--rampup-batch-size, --step-batch-size-schedule) runs smaller global
// batches first: a layout that cannot split one is rejected with the batch named, and each
// layout's memory holds the micro-batches its pipeline schedule keeps alive for them (the
// interleaved warm-up covers all of them when few).
TEST(Search, KeepsToTheSchedulesSmallerBatches) {
    SearchInputs in = inputs(gpt22b(), "h100-80gb", 16, 8, 80);
    in.global_batch = 64;
    const SearchResult plain = search_layouts(in);
    in.scheduled_batches = {8, 16};
    const SearchResult r = search_layouts(in);
    ASSERT_FALSE(r.feasible.empty());
    // DP 16 cannot split 8 samples whatever the micro-batch: that (TP, PP) has no layout.
    EXPECT_TRUE(any_reason(r, "the scheduled global batch 8 does not split into micro-batch x DP = 1 x 16"));
    auto splits = [](const Layout& l, std::int64_t b) {
        const int unit = l.micro_batch * l.dp;
        return b % unit == 0 && (l.vp <= 1 || (b / unit) % l.pp == 0);
    };
    int interleaved_unsplit = 0;  // layouts of the constant batch whose interleaving 8 cannot take
    for (const Candidate& p : plain.feasible)
        interleaved_unsplit += p.layout.vp > 1 && 8 % (p.layout.micro_batch * p.layout.dp) == 0 && !splits(p.layout, 8);
    EXPECT_GT(interleaved_unsplit, 0);
    EXPECT_LT(r.feasible.size(), plain.feasible.size());
    auto same = [](const Layout& a, const Layout& b) {
        return a.tp == b.tp && a.pp == b.pp && a.dp == b.dp && a.vp == b.vp && a.micro_batch == b.micro_batch &&
               a.recompute == b.recompute && a.sequence_parallel == b.sequence_parallel &&
               a.distributed_optimizer == b.distributed_optimizer;
    };
    int more = 0;
    for (const Candidate& c : r.feasible) {
        const Layout& l = c.layout;
        const int unit = l.micro_batch * l.dp;
        EXPECT_TRUE(splits(l, 8) && splits(l, 16)) << "TP " << l.tp << " PP " << l.pp << " VP " << l.vp;
        EXPECT_EQ(l.ramp_micro_batches, (std::vector<std::int64_t>{8 / unit, 16 / unit}));
        for (const Candidate& p : plain.feasible)
            if (same(p.layout, l)) {
                EXPECT_GE(c.memory.total(), p.memory.total());
                more += c.memory.total() > p.memory.total();
            }
    }
    EXPECT_GT(more, 0);  // some interleaved layout keeps more alive with 8 or 16 samples
}

TEST(Search, RunnerUpDiffersStructurally) {
    SearchInputs in = inputs(gpt22b(), "h100-80gb", 16, 8, 80);
    in.max_global_batch = 32;
    SearchResult r = search_layouts(in);
    const Candidate* ru = runner_up(r);
    ASSERT_NE(ru, nullptr);
    const Layout& b = r.feasible.front().layout;
    EXPECT_TRUE(ru->layout.tp != b.tp || ru->layout.pp != b.pp || ru->layout.dp != b.dp ||
                ru->layout.micro_batch != b.micro_batch);
    EXPECT_LE(ru->tokens_per_second, r.feasible.front().tokens_per_second);
}

TEST(Search, MoreMemoryNeverLosesLayouts) {
    SearchInputs in = inputs(gpt22b(), "a100-80gb", 32, 8, 40);
    in.max_global_batch = 64;
    std::size_t at40 = search_layouts(in).feasible.size();
    in.device_memory_bytes = 80ull << 30;
    std::size_t at80 = search_layouts(in).feasible.size();
    EXPECT_GT(at80, at40);
}

}  // namespace
}  // namespace gpt::plan::test

namespace gpt::plan::test {
namespace {

TEST(Search, FlashAttentionMakesSelectiveRecomputePointless) {
    SearchInputs in = inputs(gpt22b(), "h100-80gb", 16, 8, 80);
    in.max_global_batch = 32;
    in.model.flash_attention = true;
    SearchResult r = search_layouts(in);
    ASSERT_FALSE(r.feasible.empty());
    for (const Candidate& c : r.feasible) EXPECT_NE(c.layout.recompute, Recompute::Selective);
    in.recompute = Recompute::Selective;  // unless the user asks for it
    SearchResult forced = search_layouts(in);
    ASSERT_FALSE(forced.feasible.empty());
    EXPECT_EQ(forced.feasible.front().layout.recompute, Recompute::Selective);
}

}  // namespace
}  // namespace gpt::plan::test
