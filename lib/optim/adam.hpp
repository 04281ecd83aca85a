// Adam with decoupled weight decay over the model's flat buffers, mixed precision the
// Megatron way: fp32 main params (a separate copy when the model is fp16/bf16, the model's
// own buffer when it is fp32), fp32 moments, unscale + clip folded into the update, and
// the half model params rewritten from the main params in the same pass.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "dist/communicator.hpp"
#include "model/gpt_model.hpp"

namespace gpt::optim {

struct GradNorm {
    double norm = 0.0;   // of the unscaled gradients, over the whole model
    bool finite = true;  // every gradient element of every rank is finite
};

struct StepResult {
    bool skipped = false;  // found inf/nan: no update (fp16 loss scaling)
    GradNorm grad;
};

struct OptimizerMemory {
    std::size_t main_params = 0;  // 0 when the model itself is fp32
    std::size_t moments = 0;      // exp_avg + exp_avg_sq
};

class AdamOptimizer {
public:
    // model_parallel: the ranks that together hold one model replica (TP x PP); the grad
    // norm and the overflow flag are reduced over it. Main params start as the model's.
    AdamOptimizer(const OptimizerConfig& cfg, model::GptModel& model,
                  dist::Communicator& model_parallel);
    ~AdamOptimizer();
    AdamOptimizer(const AdamOptimizer&) = delete;
    AdamOptimizer& operator=(const AdamOptimizer&) = delete;

    // Global L2 norm of grads / loss_scale. Parameters replicated over TP count once; the
    // pipeline's copy of the tied embedding is not counted twice.
    GradNorm grad_norm(double loss_scale);
    // This rank's share before any reduction: {sum of squares of counted grads, number of
    // non-finite ranges}. A rank holding several model chunks (interleaved pipeline) sums
    // its optimizers' shares, reduces them once and steps each with the common norm.
    std::array<double, 2> local_grad_stats() const;
    static GradNorm finish_grad_norm(const std::array<double, 2>& reduced, double loss_scale);
    // Unscale, check, clip to --clip-grad, update. Skips (and does not count a step) when a
    // gradient is not finite.
    StepResult step(double lr, double loss_scale);
    // The same with a norm already reduced over every chunk of the model-parallel group.
    StepResult step(double lr, double loss_scale, const GradNorm& norm);

    std::int64_t steps() const { return step_; }
    void set_steps(std::int64_t s) { step_ = s; }
    float* main_params() { return main_; }
    float* exp_avg() { return exp_avg_; }
    float* exp_avg_sq() { return exp_avg_sq_; }
    OptimizerMemory memory() const;
    // Re-copies main params from the model (after the model's params were set).
    void reload_main_params();

private:
    // Contiguous element ranges of the flat buffers, merged over neighbouring entries (the
    // zero padding between entries stays zero under Adam and adds nothing to the norm), so
    // a step is a few long backend calls instead of one per parameter.
    struct Range {
        std::int64_t begin = 0, end = 0;
        bool weight_decay = false;  // update ranges
        bool counted = true;        // norm ranges: contributes to the grad norm
    };
    OptimizerConfig cfg_;
    std::vector<Range> update_ranges_, norm_ranges_;
    model::GptModel& model_;
    Backend& be_;
    dist::Communicator& mp_;
    std::int64_t n_ = 0;
    float* main_ = nullptr;   // == model params when fp32
    bool own_main_ = false;
    float* exp_avg_ = nullptr;
    float* exp_avg_sq_ = nullptr;
    std::int64_t step_ = 0;
};

}  // namespace gpt::optim
