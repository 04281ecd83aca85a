// Megatron's initialisation, computed per element from the GLOBAL tensor index.
//
// Element (i, j) of a global parameter is normal(0, std) drawn from Philox keyed by a hash of
// (seed, parameter name) at counter i * cols + j, so a rank generates only its own slice and
// still gets exactly the values a 1-rank run has there: results do not depend on TP/PP.
#pragma once

#include <cstdint>

#include "model/param_layout.hpp"

namespace gpt::model {

// Normal(0, init_std) for weights and embeddings, init_std / sqrt(2 * num_layers) for the
// output projections (attention dense, dense_4h_to_h), 0 for biases and LN beta, 1 for LN
// gamma. Writes this rank's slice of `e` into out[0 .. e.numel).
void init_parameter(const ParamEntry& e, const ModelDims& dims, double init_std,
                    std::uint64_t seed, float* out);

// Every entry of the layout into a host buffer of layout.total_elements() (padding zeroed).
void init_parameters(const ParamLayout& layout, const ModelDims& dims, double init_std,
                     std::uint64_t seed, float* out);

// The per-parameter Philox key (exposed for tests).
std::uint64_t parameter_seed(std::uint64_t seed, const std::string& name);

}  // namespace gpt::model
