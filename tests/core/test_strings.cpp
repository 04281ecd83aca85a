#include <gtest/gtest.h>

#include "core/strings.hpp"

using namespace gpt;

TEST(Strings, EditDistance) {
    EXPECT_EQ(edit_distance("num-layers", "num-layers"), 0u);
    EXPECT_EQ(edit_distance("num-layer", "num-layers"), 1u);
    EXPECT_EQ(edit_distance("", "abc"), 3u);
    EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(Strings, ClosestMatchSuggestsNearAndRejectsFar) {
    std::vector<std::string> c{"num-layers", "hidden-size", "num-attention-heads"};
    EXPECT_EQ(closest_match("num-layres", c), "num-layers");
    EXPECT_EQ(closest_match("hiden-size", c), "hidden-size");
    EXPECT_EQ(closest_match("zzzzzzzzzzzzzz", c), "");
}

TEST(Strings, SplitAndTrim) {
    auto v = split_whitespace("  0.3 a\t0.7  b \n");
    ASSERT_EQ(v.size(), 4u);
    EXPECT_EQ(v[0], "0.3");
    EXPECT_EQ(v[3], "b");
    EXPECT_EQ(trim("  x y \t"), "x y");
}
