#include "plan/checkpoint_size.hpp"

#include "core/dtype.hpp"
#include "plan/model_shape.hpp"

namespace gpt::plan {

std::uint64_t predicted_checkpoint_bytes(const Config& cfg) {
    const ModelShape m = model_shape_from_config(cfg);
    // The embedding is stored with the vocabulary padded for this run's TP.
    const auto params = static_cast<std::uint64_t>(total_params(m, cfg.parallel.tensor_model_parallel_size));
    constexpr std::uint64_t kFp32OptimizerState = 3 * sizeof(float);  // main param, exp_avg, exp_avg_sq
    return params * (dtype_size(m.dtype) + kFp32OptimizerState);
}

}  // namespace gpt::plan
