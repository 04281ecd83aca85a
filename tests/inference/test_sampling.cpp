// Temperature, top-k and top-p on hand-made distributions: what is kept is exact, how often
// each kept token is drawn is checked against its renormalised probability (5 sigma of
// 4000 draws), and the Philox draws are reproducible and distinct per prompt and position.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/errors.hpp"
#include "inference/sampling.hpp"

namespace gpt::inference {
namespace {

constexpr int kDraws = 4000;

std::vector<int> counts(const std::vector<float>& logits, std::int64_t vocab, const SamplingOptions& o) {
    std::vector<int> c(logits.size(), 0);
    for (int i = 0; i < kDraws; ++i) ++c[static_cast<std::size_t>(pick_token(logits.data(), vocab, o, static_cast<std::uint64_t>(i), 5))];
    return c;
}

void expect_frequency(int count, double p) {
    const double sigma = std::sqrt(p * (1 - p) / kDraws);
    EXPECT_NEAR(count / static_cast<double>(kDraws), p, 5 * sigma + 1e-12);
}

std::vector<float> logits_of(std::vector<double> probs) {
    std::vector<float> l;
    for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
    return l;
}

TEST(Sampling, GreedyIsTheFirstArgmaxWithinTheVocabulary) {
    const std::vector<float> l = {0.5f, 2.0f, 2.0f, 9.0f};  // id 3: a padding row
    SamplingOptions g;
    g.greedy = true;
    EXPECT_EQ(pick_token(l.data(), 3, g, 0, 0), 1);
    SamplingOptions s;
    for (int c : counts(l, 3, s)) (void)c;
    EXPECT_EQ(counts(l, 3, s)[3], 0);
}

TEST(Sampling, PlainDrawFollowsTheSoftmax) {
    const auto l = logits_of({0.5, 0.3, 0.2});
    const auto c = counts(l, 3, SamplingOptions{});
    expect_frequency(c[0], 0.5);
    expect_frequency(c[1], 0.3);
    expect_frequency(c[2], 0.2);
}

TEST(Sampling, TemperatureDividesTheLogits) {
    const auto l = logits_of({0.8, 0.2});
    SamplingOptions o;
    o.temperature = 2.0f;  // p ~ sqrt(p): 2/3, 1/3
    const auto c = counts(l, 2, o);
    expect_frequency(c[0], 2.0 / 3.0);
}

TEST(Sampling, TopKKeepsTheKMostLikely) {
    const auto l = logits_of({0.1, 0.4, 0.2, 0.3});
    SamplingOptions o;
    o.top_k = 2;
    const auto c = counts(l, 4, o);
    EXPECT_EQ(c[0], 0);
    EXPECT_EQ(c[2], 0);
    expect_frequency(c[1], 0.4 / 0.7);
}

TEST(Sampling, TopPKeepsTheTokenThatCrossesP) {
    const auto l = logits_of({0.2, 0.5, 0.3});
    SamplingOptions o;
    o.top_p = 0.6f;  // 0.5 < 0.6: the 0.3 token stays, the 0.2 one goes
    const auto c = counts(l, 3, o);
    EXPECT_EQ(c[0], 0);
    expect_frequency(c[1], 0.5 / 0.8);
    o.top_p = 0.4f;  // the most likely token alone reaches it
    EXPECT_EQ(counts(l, 3, o)[1], kDraws);
}

TEST(Sampling, TopKThenTopP) {
    const auto l = logits_of({0.4, 0.3, 0.2, 0.1});
    SamplingOptions o;
    o.top_k = 3;    // renormalised: 4/9, 3/9, 2/9
    o.top_p = 0.7f; // 4/9 < 0.7 <= 7/9: two tokens
    const auto c = counts(l, 4, o);
    EXPECT_EQ(c[2] + c[3], 0);
    expect_frequency(c[0], 4.0 / 7.0);
}

TEST(Sampling, DrawsAreReproducibleAndDistinct) {
    EXPECT_EQ(sampling_uniform(1, 2, 3), sampling_uniform(1, 2, 3));
    EXPECT_NE(sampling_uniform(1, 2, 3), sampling_uniform(1, 3, 3));
    EXPECT_NE(sampling_uniform(1, 2, 3), sampling_uniform(1, 2, 4));
    EXPECT_NE(sampling_uniform(1, 2, 3), sampling_uniform(2, 2, 3));
    for (std::uint64_t i = 0; i < 1000; ++i) {
        const double u = sampling_uniform(9, i, i * 7);
        ASSERT_GE(u, 0.0);
        ASSERT_LT(u, 1.0);
    }
}

TEST(Sampling, LogProbIsLogSoftmax) {
    const auto l = logits_of({0.5, 0.25, 0.25});
    EXPECT_NEAR(log_prob(l.data(), 3, 1), std::log(0.25), 1e-7);
}

TEST(Sampling, BadValuesAreUsageErrors) {
    SamplingOptions o;
    o.temperature = 0.0f;
    EXPECT_THROW(validate(o), UsageError);
    o = {};
    o.top_p = 1.5f;
    EXPECT_THROW(validate(o), UsageError);
    o = {};
    o.top_k = -1;
    EXPECT_THROW(validate(o), UsageError);
}

}  // namespace
}  // namespace gpt::inference
