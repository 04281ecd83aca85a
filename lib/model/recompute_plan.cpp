#include "model/recompute_plan.hpp"

#include <algorithm>

#include "core/errors.hpp"

namespace gpt::model {

std::vector<LayerGroup> recompute_groups(const ModelOptions& opt, int L) {
    std::vector<LayerGroup> g;
    if (opt.recompute != ModelOptions::Recompute::Full) {
        for (int l = 0; l < L; ++l) g.push_back({l, 1, false});
        return g;
    }
    GPT_ASSERT(opt.recompute_num_layers > 0, "recompute_num_layers ", opt.recompute_num_layers);
    const int n = std::min(opt.recompute_num_layers, L);
    if (opt.recompute_block) {
        for (int l = 0; l < L; ++l) g.push_back({l, 1, l < n});
        return g;
    }
    for (int l = 0; l < L; l += n) g.push_back({l, std::min(n, L - l), true});
    return g;
}

int recompute_set_layers(const std::vector<LayerGroup>& groups) {
    int most = 0;
    for (const LayerGroup& g : groups)
        if (g.recompute) most = std::max(most, g.count);
    return most;
}

}  // namespace gpt::model
