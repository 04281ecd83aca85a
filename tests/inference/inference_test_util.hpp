// A tiny model for the lib/inference tests: the model tests' configuration with room to
// generate (24 positions), parameters with noise on every element so the logits are far
// from uniform and the argmax is not decided by rounding.
#pragma once

#include <random>
#include <vector>

#include "../model/model_test_util.hpp"
#include "inference/kv_model.hpp"

namespace gpt::test {

inline model::ModelDims inference_dims(int tp_size = 1, int tp_rank = 0) {
    ModelConfig c = tiny_model_config();
    c.max_position_embeddings = 24;
    return model::make_model_dims(c, 50, tp_size, tp_rank);  // vocab 50, padded to 64 (x TP)
}

inline std::vector<float> inference_params(const model::ModelDims& d, unsigned seed) {
    const model::ParamLayout layout(d, model::ChunkSpec{0, d.num_layers, true, true});
    std::vector<float> p(static_cast<std::size_t>(layout.total_elements()), 0.0f);
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.0f, 0.3f);
    for (const auto& e : layout.entries())
        for (std::int64_t i = 0; i < e.numel; ++i)
            p[static_cast<std::size_t>(e.offset + i)] = (e.init == model::ParamInit::One ? 1.0f : 0.0f) + n(rng);
    return p;
}

}  // namespace gpt::test
