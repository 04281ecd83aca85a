// Rank topology as a pure function (no MPI inside), with Megatron's order:
//   global_rank = tp_rank + tp_size * (dp_rank + dp_size * pp_rank)
// so tensor-parallel peers are adjacent ranks (same node), and pipeline stages are furthest.
#pragma once

#include <vector>

namespace gpt::dist {

struct RankCoords {
    int tp = 0;
    int dp = 0;
    int pp = 0;
    bool operator==(const RankCoords&) const = default;
};

class RankGrid {
public:
    // Throws UsageError when world is not divisible by tp * pp (naming the numbers).
    RankGrid(int world_size, int tp_size, int pp_size);

    int world_size() const { return world_; }
    int tp_size() const { return tp_; }
    int pp_size() const { return pp_; }
    int dp_size() const { return dp_; }

    RankCoords coords(int rank) const;
    int rank(const RankCoords& c) const;

    // Sorted global ranks of each group that contains `rank`.
    std::vector<int> tp_group(int rank) const;
    std::vector<int> dp_group(int rank) const;
    std::vector<int> pp_group(int rank) const;
    std::vector<int> model_parallel_group(int rank) const;  // all tp x pp ranks of one dp replica
    // First and last pipeline stage of the same (tp, dp): they share the tied word embedding.
    // A single rank when pp == 1.
    std::vector<int> embedding_group(int rank) const;

    bool is_first_stage(int rank) const { return coords(rank).pp == 0; }
    bool is_last_stage(int rank) const { return coords(rank).pp == pp_ - 1; }

private:
    int world_, tp_, pp_, dp_;
};

}  // namespace gpt::dist
