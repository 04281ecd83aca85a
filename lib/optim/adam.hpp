// Adam with decoupled weight decay over the model's flat buffers, mixed precision the
// Megatron way: fp32 main params (a separate copy when the model is fp16/bf16, the model's
// own buffer when it is fp32), fp32 moments, unscale + clip folded into the update, and
// the half model params rewritten from the main params in the same pass.
//
// Distributed optimizer (Megatron's --use-distributed-optimizer, ZeRO-1): with a data-
// parallel group of d > 1 ranks, DP rank r owns the contiguous slice [r*P/d, (r+1)*P/d) of
// the model's padded flat buffers (P = model.padded_elements()). It keeps main params and
// moments for that slice only, steps it from the DP-summed gradients the trainer
// reduce-scatters into place, and all-gathers the updated model params over DP. Optimizer
// memory per parameter drops from 12 bytes to 12/d (6 + 12/d with half params + fp32 grads).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "core/timers.hpp"
#include "dist/communicator.hpp"
#include "model/gpt_model.hpp"

namespace gpt::optim {

struct GradNorm {
    double norm = 0.0;   // of the unscaled gradients, over the whole model
    bool finite = true;  // every gradient element of every rank is finite
    // Gradient elements equal to zero over the whole model, each parameter counted once
    // (Megatron's --log-num-zeros-in-grad). Counted on the loss-scaled gradients: unscaling
    // in fp32 would zero only magnitudes below 2^-149 x the scale.
    std::int64_t zeros = 0;
};

// local_grad_stats' shares: {sum of squares, non-finite ranges, zero elements}, added over
// a norm group as doubles (counts below 2^53 are exact).
using GradStatShares = std::array<double, 3>;

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
    // norm_group: every rank holding a distinct piece of the gradients; the grad norm and
    // the overflow flag are reduced over it. Without sharding that is the model-parallel
    // group (TP x PP, one model replica); with sharding it is model-parallel x DP (the
    // world). distributed_dp: the data-parallel group to shard over; nullptr or a group of
    // one rank: no sharding. Sharding requires model.padded_elements() % dp.size() == 0
    // (build the model with buffer_multiple = dp size x ParamLayout::kAlign). Main params
    // start as the model's.
    AdamOptimizer(const OptimizerConfig& cfg, model::GptModel& model,
                  dist::Communicator& norm_group, dist::Communicator* distributed_dp = nullptr);
    ~AdamOptimizer();
    AdamOptimizer(const AdamOptimizer&) = delete;
    AdamOptimizer& operator=(const AdamOptimizer&) = delete;

    // Global L2 norm of grads / loss_scale. Parameters replicated over TP count once; the
    // pipeline's copy of the tied embedding is not counted twice.
    GradNorm grad_norm(double loss_scale);
    // This rank's share before any reduction: {sum of squares of counted grads, number of
    // non-finite ranges, zeros among the counted parameters' grads}, over this rank's shard
    // only when sharded. A rank holding several model chunks (interleaved pipeline) sums its
    // optimizers' shares, reduces them once over norm_group() and steps each with the
    // common norm.
    GradStatShares local_grad_stats() const;
    static GradNorm finish_grad_norm(const GradStatShares& reduced, double loss_scale);
    // This rank's share of the parameters' squared L2 norm (Megatron's calc_params_l2_norm):
    // the fp32 main parameters of the same counted ranges as the gradient norm (TP-replicated
    // ones on TP rank 0, the head's copy of the tied embedding not at all), this rank's shard
    // only when sharded. Sum over norm_group() and take the root for the norm.
    double local_param_sum_squares() const;
    // Unscale, check, clip to --clip-grad, update. Skips (and does not count a step) when a
    // gradient is not finite. Sharded: reads only the shard of the grad buffer, which must
    // hold the DP sum of the gradients there (the rest may be garbage), updates the shard,
    // then all-gathers the model params over DP (not on a skipped step).
    StepResult step(double lr, double loss_scale);
    // The same with a norm already reduced over every chunk of the model-parallel group.
    StepResult step(double lr, double loss_scale, const GradNorm& norm);

    // The decoupled weight decay of the next steps (Megatron's scheduler sets it each step
    // from --weight-decay-incr-style); --weight-decay until then.
    void set_weight_decay(double wd) { weight_decay_ = wd; }
    // --decoupled-lr: the learning rate of the word embeddings and the output layer in the
    // next steps (the scheduler's decoupled_lr()); without the flag they take step's lr.
    void set_decoupled_lr(double lr) { decoupled_lr_ = lr; }
    std::int64_t steps() const { return step_; }
    void set_steps(std::int64_t s) { step_ = s; }
    dist::Communicator& norm_group() { return norm_; }
    // Megatron's optimizer-inner-step and params-all-gather phases go to `t` (may be null).
    void set_timers(Timers* t) { timers_ = t; }
    // The distributed optimizer: state sharded over a data-parallel group of > 1 ranks.
    bool distributed() const { return dp_ != nullptr; }
    // The flat elements this rank's optimizer state covers: [0, layout.total_elements())
    // without sharding, [r*P/d, (r+1)*P/d) for DP rank r of d with sharding.
    std::int64_t shard_begin() const { return shard_begin_; }
    std::int64_t shard_size() const { return shard_size_; }
    // shard_size() fp32 elements each; element i is flat element shard_begin() + i.
    float* main_params() { return main_; }
    float* exp_avg() { return exp_avg_; }
    float* exp_avg_sq() { return exp_avg_sq_; }
    OptimizerMemory memory() const;
    // Re-copies main params (the shard) from the model (after the model's params were set).
    void reload_main_params();
    // The converse, after main params were set (checkpoint load): rounds them into the
    // model's params at the same flat positions and, when distributed, all-gathers the
    // model over DP as a step does. Collective over DP. The main params of alignment
    // padding (between entries and after the last) must hold zeros.
    void publish_main_params();

private:
    void gather_model_params();  // all-gather every DP rank's shard of the model params
    // Contiguous element ranges of the flat buffers, merged over neighbouring entries (the
    // zero padding between entries stays zero under Adam and adds nothing to the norm), so
    // a step is a few long backend calls instead of one per parameter.
    struct Range {
        std::int64_t begin = 0, end = 0;
        bool weight_decay = false;  // update ranges
        bool counted = true;        // norm ranges: contributes to the grad norm
        bool decoupled = false;     // update ranges: --decoupled-lr's group
    };
    OptimizerConfig cfg_;
    double weight_decay_ = 0.0;
    double decoupled_lr_ = 0.0;
    std::vector<Range> update_ranges_, norm_ranges_;
    // Alignment padding inside the counted norm ranges (always zero), left out of the zeros.
    std::int64_t counted_padding_ = 0;
    model::GptModel& model_;
    Backend& be_;
    dist::Communicator& norm_;
    dist::Communicator* dp_ = nullptr;  // non-null only when sharded (size > 1)
    std::int64_t shard_begin_ = 0, shard_size_ = 0;
    float* main_ = nullptr;   // == model params + shard_begin_ when fp32
    bool own_main_ = false;
    float* exp_avg_ = nullptr;
    float* exp_avg_sq_ = nullptr;
    std::int64_t step_ = 0;
    Timers* timers_ = nullptr;
};

}  // namespace gpt::optim
