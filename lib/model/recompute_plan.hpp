// Which of a chunk's layers keep their activations for backward and which are recomputed,
// as Megatron's checkpointed segments: backward re-runs a recomputed group's forward from
// the group's input, then runs the group's layer backwards.
#pragma once

#include <vector>

#include "model/model_spec.hpp"

namespace gpt::model {

// Local layers [first, first + count) of the chunk.
struct LayerGroup {
    int first = 0;
    int count = 1;
    bool recompute = false;  // only the group input and its last layer's output are kept
};

// In forward order, covering every layer once. None and Selective: one group per layer,
// none recomputed. Full uniform: groups of recompute_num_layers (the last one shorter).
// Full block: the first recompute_num_layers layers one group each, recomputed; then the
// rest one group each, kept. recompute_num_layers beyond the chunk means all its layers.
std::vector<LayerGroup> recompute_groups(const ModelOptions& opt, int chunk_layers);

// The most layers any recomputed group holds: how many layers' worth of buffers the shared
// recompute set needs (0 without full recomputation).
int recompute_set_layers(const std::vector<LayerGroup>& groups);

}  // namespace gpt::model
