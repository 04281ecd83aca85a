// Word embeddings over vocab shards and position embeddings, forward and backward.
#include <gtest/gtest.h>

#include <tuple>
#include <utility>

#include "backend_test_util.hpp"

namespace gpt::test {
namespace {

class EmbeddingTest : public ::testing::TestWithParam<DType> {};

TEST_P(EmbeddingTest, ShardedLookupAndScatter) {
  const DType t = GetParam();
  auto be = cpu_backend();
  // The second shape is above the threading threshold (b*s*h >= 2^20).
  for (auto [b, s, h] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{3, 7, 37},
                         {4, 256, 1030}}) {
    const std::int64_t vocab = 23;
    std::vector<std::int32_t> tokens(b * s);
    for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>((i * 7 + 3) % vocab);
    tokens[4] = tokens[11];  // repeated token: its gradient rows must add up
    auto table = rounded(t, random_vec(vocab * h, 101));
    auto dout = rounded(t, random_vec(s * b * h, 102));
    // Two shards [0, 10) and [10, 23): the shard outputs sum to the full lookup.
    std::vector<double> total(s * b * h, 0.0);
    for (auto [v0, v1] : {std::pair<std::int64_t, std::int64_t>{0, 10}, {10, 23}}) {
        std::vector<double> shard(table.begin() + v0 * h, table.begin() + v1 * h);
        Buf bt(*be, t, shard), bo(*be, t, s * b * h);
        be->embedding_forward(tokens.data(), bt.p(), bo.p(), b, s, h, v0, v1, t);
        auto o = bo.get();
        for (std::size_t i = 0; i < o.size(); ++i) total[i] += o[i];

        auto d0 = random_vec((v1 - v0) * h, 103);
        Buf bd(*be, t, dout), dt(*be, DType::F32, d0);
        be->embedding_backward(tokens.data(), bd.p(), dt.f32(), b, s, h, v0, v1, t);
        std::vector<double> want(d0.size());
        for (std::size_t i = 0; i < d0.size(); ++i) want[i] = static_cast<float>(d0[i]);
        for (std::int64_t si = 0; si < s; ++si)
            for (std::int64_t bi = 0; bi < b; ++bi) {
                const std::int64_t id = tokens[bi * s + si];
                if (id < v0 || id >= v1) continue;
                for (std::int64_t c = 0; c < h; ++c) want[(id - v0) * h + c] += dout[(si * b + bi) * h + c];
            }
        // fp32 sums of up to ~50 tokens per row: a few ulp of O(1) values.
        EXPECT_TRUE(all_close(dt.get(), want, {1e-5, 1e-5}));
    }
    std::vector<double> want(s * b * h);
    for (std::int64_t si = 0; si < s; ++si)
        for (std::int64_t bi = 0; bi < b; ++bi)
            for (std::int64_t c = 0; c < h; ++c)
                want[(si * b + bi) * h + c] = table[tokens[bi * s + si] * h + c];
    EXPECT_TRUE(all_close(total, want, {0, 0}));
  }
}

TEST_P(EmbeddingTest, PositionEmbedding) {
  const DType t = GetParam();
  auto be = cpu_backend();
  for (auto [b, s] : {std::pair<std::int64_t, std::int64_t>{2, 9}, {60, 16}}) {
    const std::int64_t h = 1100, max_pos = 20, first = 4;
    auto table = rounded(t, random_vec(max_pos * h, 111));
    auto x = rounded(t, random_vec(s * b * h, 112));
    Buf bt(*be, t, table), bx(*be, t, x);
    be->position_embedding_forward(bt.p(), bx.p(), b, s, h, first, t);
    std::vector<double> want(x.size());
    for (std::int64_t si = 0; si < s; ++si)
        for (std::int64_t bi = 0; bi < b; ++bi)
            for (std::int64_t c = 0; c < h; ++c)
                want[(si * b + bi) * h + c] = x[(si * b + bi) * h + c] + table[(first + si) * h + c];
    EXPECT_TRUE(all_close(bx.get(), want, tol_for(t)));

    auto d0 = random_vec(max_pos * h, 113);
    Buf dt(*be, DType::F32, d0), bd(*be, t, x);
    be->position_embedding_backward(bd.p(), dt.f32(), b, s, h, first, t);
    std::vector<double> wd(d0.size());
    for (std::size_t i = 0; i < d0.size(); ++i) wd[i] = static_cast<float>(d0[i]);
    for (std::int64_t si = 0; si < s; ++si)
        for (std::int64_t bi = 0; bi < b; ++bi)
            for (std::int64_t c = 0; c < h; ++c) wd[(first + si) * h + c] += x[(si * b + bi) * h + c];
    EXPECT_TRUE(all_close(dt.get(), wd, {1e-5, 1e-5}));  // fp32 sums over up to 60 b
  }
}

INSTANTIATE_TEST_SUITE_P(Types, EmbeddingTest, ::testing::ValuesIn(kAllTypes),
                         [](const auto& info) { return dname(info.param); });

}  // namespace
}  // namespace gpt::test
