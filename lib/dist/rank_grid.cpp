#include "dist/rank_grid.hpp"

#include "core/errors.hpp"

namespace gpt::dist {

RankGrid::RankGrid(int world_size, int tp_size, int pp_size)
    : world_(world_size), tp_(tp_size), pp_(pp_size), dp_(0) {
    GPT_REQUIRE(world_size > 0, UsageError, "world size must be positive, got ", world_size);
    GPT_REQUIRE(tp_size > 0, UsageError, "tensor-model-parallel-size must be positive, got ", tp_size);
    GPT_REQUIRE(pp_size > 0, UsageError, "pipeline-model-parallel-size must be positive, got ", pp_size);
    GPT_REQUIRE(world_size % (tp_size * pp_size) == 0, UsageError, "world size ", world_size,
                " is not divisible by tensor-model-parallel-size x pipeline-model-parallel-size = ",
                tp_size, " x ", pp_size, " = ", tp_size * pp_size);
    dp_ = world_size / (tp_size * pp_size);
}

RankCoords RankGrid::coords(int rank) const {
    GPT_ASSERT(rank >= 0 && rank < world_, "rank ", rank, " outside world of ", world_);
    RankCoords c;
    c.tp = rank % tp_;
    c.dp = (rank / tp_) % dp_;
    c.pp = rank / (tp_ * dp_);
    return c;
}

int RankGrid::rank(const RankCoords& c) const {
    GPT_ASSERT(c.tp >= 0 && c.tp < tp_ && c.dp >= 0 && c.dp < dp_ && c.pp >= 0 && c.pp < pp_,
               "coords (tp ", c.tp, ", dp ", c.dp, ", pp ", c.pp, ") outside the grid");
    return c.tp + tp_ * (c.dp + dp_ * c.pp);
}

std::vector<int> RankGrid::tp_group(int r) const {
    RankCoords c = coords(r);
    std::vector<int> g;
    for (int t = 0; t < tp_; ++t) g.push_back(rank({t, c.dp, c.pp}));
    return g;
}

std::vector<int> RankGrid::dp_group(int r) const {
    RankCoords c = coords(r);
    std::vector<int> g;
    for (int d = 0; d < dp_; ++d) g.push_back(rank({c.tp, d, c.pp}));
    return g;
}

std::vector<int> RankGrid::pp_group(int r) const {
    RankCoords c = coords(r);
    std::vector<int> g;
    for (int p = 0; p < pp_; ++p) g.push_back(rank({c.tp, c.dp, p}));
    return g;
}

std::vector<int> RankGrid::model_parallel_group(int r) const {
    RankCoords c = coords(r);
    std::vector<int> g;
    for (int p = 0; p < pp_; ++p)
        for (int t = 0; t < tp_; ++t) g.push_back(rank({t, c.dp, p}));
    return g;  // ascending: rank grows with tp fastest, then pp
}

std::vector<int> RankGrid::embedding_group(int r) const {
    RankCoords c = coords(r);
    std::vector<int> g{rank({c.tp, c.dp, 0})};
    if (pp_ > 1) g.push_back(rank({c.tp, c.dp, pp_ - 1}));
    return g;
}

}  // namespace gpt::dist
