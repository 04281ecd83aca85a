// Cross-entropy from shard pieces: the unsplit computation against fp64, and 2- and 3-way
// vocab splits combined (max, then sums) equal to the unsplit one.
#include <gtest/gtest.h>

#include <cmath>

#include "backend_test_util.hpp"

namespace gpt::test {
namespace {

struct CeResult {
    std::vector<double> loss, dlogits;
};

// Runs the four calls over vocab shards given by boundaries, combining like the
// vocab-parallel caller (MAX-reduce of max, SUM of sum_exp and target_logit).
// one_pass: cross_entropy_stats per shard, combined by rescaling each shard's sum_exp to
// the global max (what a vocab-parallel caller does), instead of max then sums.
CeResult run_sharded(Backend& be, DType t, const std::vector<double>& logits,
                     const std::vector<std::int32_t>& targets, const std::vector<double>& dloss,
                     std::int64_t rows, std::int64_t vocab,
                     const std::vector<std::int64_t>& bounds, bool one_pass = false) {
    const std::size_t nsh = bounds.size() - 1;
    std::vector<std::vector<double>> shard(nsh);
    for (std::size_t k = 0; k < nsh; ++k) {
        const std::int64_t v = bounds[k + 1] - bounds[k];
        shard[k].resize(rows * v);
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t j = 0; j < v; ++j) shard[k][r * v + j] = logits[r * vocab + bounds[k] + j];
    }
    std::vector<double> gmax(rows, -INFINITY), gsum(rows, 0.0), gtl(rows, 0.0);
    if (one_pass) {
        std::vector<std::vector<double>> lmax(nsh), lsum(nsh);
        for (std::size_t k = 0; k < nsh; ++k) {
            const std::int64_t v = bounds[k + 1] - bounds[k];
            Buf bl(be, t, shard[k]), mx(be, DType::F32, rows), se(be, DType::F32, rows),
                tl(be, DType::F32, rows);
            be.cross_entropy_stats(bl.p(), targets.data(), mx.f32(), se.f32(), tl.f32(), rows,
                                   v, bounds[k], t);
            lmax[k] = mx.get();
            lsum[k] = se.get();
            auto b = tl.get();
            for (std::int64_t r = 0; r < rows; ++r) {
                gmax[r] = std::max(gmax[r], lmax[k][r]);
                gtl[r] += b[r];
            }
        }
        for (std::size_t k = 0; k < nsh; ++k)
            for (std::int64_t r = 0; r < rows; ++r)
                gsum[r] += static_cast<float>(lsum[k][r] * std::exp(lmax[k][r] - gmax[r]));
    }
    for (std::size_t k = 0; k < nsh && !one_pass; ++k) {
        const std::int64_t v = bounds[k + 1] - bounds[k];
        Buf bl(be, t, shard[k]), mx(be, DType::F32, rows);
        be.cross_entropy_max(bl.p(), mx.f32(), rows, v, t);
        auto m = mx.get();
        for (std::int64_t r = 0; r < rows; ++r) gmax[r] = std::max(gmax[r], m[r]);
    }
    Buf bmax(be, DType::F32, gmax);
    for (std::size_t k = 0; k < nsh && !one_pass; ++k) {
        const std::int64_t v = bounds[k + 1] - bounds[k];
        Buf bl(be, t, shard[k]), se(be, DType::F32, rows), tl(be, DType::F32, rows);
        be.cross_entropy_sums(bl.p(), targets.data(), bmax.f32(), se.f32(), tl.f32(), rows, v,
                              bounds[k], t);
        auto a = se.get(), b = tl.get();
        for (std::int64_t r = 0; r < rows; ++r) {
            gsum[r] += static_cast<float>(a[r]);
            gtl[r] += b[r];
        }
    }
    for (auto& x : gsum) x = static_cast<float>(x);
    Buf bsum(be, DType::F32, gsum), btl(be, DType::F32, gtl), loss(be, DType::F32, rows);
    be.cross_entropy_loss(bmax.f32(), bsum.f32(), btl.f32(), loss.f32(), rows);
    CeResult res{loss.get(), std::vector<double>(rows * vocab)};
    Buf bdl(be, DType::F32, dloss);
    for (std::size_t k = 0; k < nsh; ++k) {
        const std::int64_t v = bounds[k + 1] - bounds[k];
        Buf bl(be, t, shard[k]), bd(be, t, rows * v);
        be.cross_entropy_backward(bl.p(), targets.data(), bmax.f32(), bsum.f32(), bdl.f32(),
                                  bd.p(), rows, v, bounds[k], t);
        auto d = bd.get();
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t j = 0; j < v; ++j) res.dlogits[r * vocab + bounds[k] + j] = d[r * v + j];
        // dlogits may alias logits
        be.cross_entropy_backward(bl.p(), targets.data(), bmax.f32(), bsum.f32(), bdl.f32(),
                                  bl.p(), rows, v, bounds[k], t);
        EXPECT_TRUE(all_close(bl.get(), d, {0, 0}));
    }
    return res;
}

class CrossEntropyTest : public ::testing::TestWithParam<DType> {};

TEST_P(CrossEntropyTest, UnsplitMatchesReferenceAndShardsCombine) {
    const DType t = GetParam();
    auto be = cpu_backend();
    for (std::int64_t vocab : {7, 1031, 3001, 5000}) {
        const std::int64_t rows = vocab == 5000 ? 210 : 6;  // 210 x 5000: threaded path
        SCOPED_TRACE(::testing::Message() << "vocab=" << vocab);
        auto logits = rounded(t, random_vec(rows * vocab, 121, -8.0, 8.0));
        std::vector<std::int32_t> targets(rows);
        for (std::int64_t r = 0; r < rows; ++r) targets[r] = static_cast<std::int32_t>((r * 811 + 5) % vocab);
        targets[rows - 1] = static_cast<std::int32_t>(vocab - 1);
        auto dloss = random_vec(rows, 122, 0.1, 1.0);
        dloss = rounded(DType::F32, dloss);
        // fp64 reference
        std::vector<double> loss(rows), dl(rows * vocab);
        for (std::int64_t r = 0; r < rows; ++r) {
            double mx = -INFINITY, sum = 0;
            for (std::int64_t j = 0; j < vocab; ++j) mx = std::max(mx, logits[r * vocab + j]);
            for (std::int64_t j = 0; j < vocab; ++j) sum += std::exp(logits[r * vocab + j] - mx);
            loss[r] = std::log(sum) + mx - logits[r * vocab + targets[r]];
            for (std::int64_t j = 0; j < vocab; ++j)
                dl[r * vocab + j] = (std::exp(logits[r * vocab + j] - mx) / sum - (j == targets[r])) * dloss[r];
        }
        CeResult whole = run_sharded(*be, t, logits, targets, dloss, rows, vocab, {0, vocab});
        EXPECT_TRUE(all_close(whole.loss, loss, {1e-5, 1e-5}));
        Tol tl = t == DType::F32 ? Tol{1e-5, 1e-7} : tol_for(t);
        tl.atol = std::max(tl.atol, tl.rtol * 1e-2);  // gradient entries near 0 at half ulp
        EXPECT_TRUE(all_close(whole.dlogits, dl, tl));
        if (vocab < 3) continue;
        const std::vector<std::vector<std::int64_t>> splits = {
            {0, vocab / 2, vocab}, {0, vocab / 3, 2 * vocab / 3 + 1, vocab}};
        CeResult fused = run_sharded(*be, t, logits, targets, dloss, rows, vocab, {0, vocab}, true);
        EXPECT_TRUE(all_close(fused.loss, loss, {1e-5, 1e-5})) << "one pass";
        EXPECT_TRUE(all_close(fused.dlogits, dl, tl)) << "one pass";
        for (const auto& b : splits) {
            CeResult fs = run_sharded(*be, t, logits, targets, dloss, rows, vocab, b, true);
            EXPECT_TRUE(all_close(fs.loss, whole.loss, {1e-6, 1e-6})) << b.size() - 1 << " shards, one pass";
            CeResult sh = run_sharded(*be, t, logits, targets, dloss, rows, vocab, b);
            EXPECT_TRUE(all_close(sh.loss, whole.loss, {1e-6, 1e-6})) << b.size() - 1 << " shards";
            // Shards add sum_exp in another order: fp32 rounding of that sum (and, for
            // 16-bit outputs, one rounding step of the storage type) may differ.
            const Tol st = t == DType::F32 ? Tol{1e-5, 1e-9} : tol_for(t);
            EXPECT_TRUE(all_close(sh.dlogits, whole.dlogits, st)) << b.size() - 1 << " shards";
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Types, CrossEntropyTest, ::testing::ValuesIn(kAllTypes),
                         [](const auto& info) { return dname(info.param); });

}  // namespace
}  // namespace gpt::test
