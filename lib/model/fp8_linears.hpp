// The FP8 linear layers of one model chunk (issue 34): the scaling state of every FP8 GEMM
// operand and the FP8 copies the GEMMs read. Megatron gets this from Transformer Engine;
// here it is three backend ops (amax, cast_to_fp8, an FP8 gemm) per operand.
//
// Operands: per linear (QKV, projection, FC1, FC2 of each FP8 layer) its input and weight
// (the forward format, E4M3) and its output gradient (the gradient format). Each has an amax,
// a scale and 1/scale in device memory, so a step needs no host round trip per GEMM:
//  - delayed scaling: the casts use the scales of the steps before; each cast MAX-accumulates
//    its tensor's amax; end_step() reduces the amaxes over TP and DP (every replica and
//    shard of a tensor gets the same scale, as Transformer Engine's amax reduction group),
//    runs core's DelayedScaling (history, margin, roll) and uploads the new scales;
//  - tensorwise (current) scaling: each cast first takes its tensor's amax, all-reduced over
//    TP (a weight or activation shard is scaled as the whole tensor), then its scale.
// Layouts (Hopper's FP8 GEMMs read both operands contiguous along k): forward y = x W^T reads
// x and W as they are; the data gradient dx = dy W reads W^T (cast with W, once per step,
// like W itself, since weights change only at the optimizer step); the weight gradient
// dW += dy^T x reads dy^T and x^T, cast in backward from the 16-bit tensors (x with its
// forward scale, so its codes are the forward's).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "core/fp8_scaling.hpp"
#include "dist/communicator.hpp"
#include "model/model_spec.hpp"

namespace gpt::model {

enum class Linear { Qkv = 0, Dense = 1, Fc1 = 2, Fc2 = 3 };

class Fp8Linears {
public:
    static constexpr int kLinears = 4;   // per layer
    static constexpr int kOperands = 3;  // input, weight, output gradient

    // The chunk's layers [first_layer, first_layer + num_layers) of the model's total_layers;
    // tokens: rows of every linear's input (T).
    Fp8Linears(Backend& be, const Fp8Options& opt, const ModelDims& dims, int first_layer,
               int num_layers, int total_layers, std::int64_t tokens, DType dtype);
    ~Fp8Linears();
    Fp8Linears(const Fp8Linears&) = delete;
    Fp8Linears& operator=(const Fp8Linears&) = delete;

    // Whether global layer L runs its linears in FP8 (not one of the 16-bit first/last).
    bool in_fp8(int layer) const;

    // y (T, out) = x (T, in) W^T with the epilogue, as model::linear_forward. record: a
    // training pass (evaluation leaves the amaxes alone). x_cast: x's codes are already in
    // the input buffer (input_codes, gather_codes) and x is not read.
    void forward(dist::Communicator& tp, int layer, Linear which, const void* x, const void* w,
                 void* y, std::int64_t in, std::int64_t out, GemmEpilogue epilogue,
                 const void* bias, void* aux, bool tanh_gelu, bool record, bool x_cast = false);
    // The fused input cast (Fp8Options::fused_input_cast, delayed scaling only: the scale
    // must be known before the tensor exists): the kernels that produce QKV's and FC1's
    // inputs (the norms) and FC2's (SwiGLU, or a GELU not fused into FC1's GEMM) write those
    // inputs' FP8 codes themselves, and forward(..., x_cast = true) reads them instead of
    // casting x. The projection's input (attention's output) is always cast separately.
    bool fuses_input_cast(int layer) const { return opt_.fused_input_cast && opt_.delayed && in_fp8(layer); }
    // Whether layer L's bias-GELU MLP runs GELU as a pass after fc1's bias-only GEMM
    // (Fp8Options::gelu_in_epilogue false), rather than in the GEMM's epilogue.
    bool gelu_pass(int layer) const { return !opt_.gelu_in_epilogue && in_fp8(layer); }
    // Where the producer of `which`'s input writes the codes: the input buffer, or with
    // `staged` (sequence parallelism: a norm sees this rank's shard) a staging buffer that
    // gather_codes then all-gathers into it. record: a training pass (its amax is kept).
    Backend::Fp8Codes input_codes(int layer, Linear which, bool record, bool staged);
    // The staged codes of every TP rank's shard_rows x in shard, in rank order (sequence order).
    void gather_codes(dist::Communicator& tp, std::int64_t shard_rows, std::int64_t in);

    // dW += dy^T x (dbias += column sums of dy), then dx = dy W (through GELU's backward with
    // gelu_pre), as model::linear_weight_grad then linear_input_grad. dy_gelu_pre (the GELU
    // pass's backward, gelu_pass): the linear's output went through GELU, dy is the gradient
    // of GELU's output and the output gradient is dy * GELU'(dy_gelu_pre); dy is clobbered.
    // Under delayed scaling with an FP8 weight gradient the cast of the output gradient
    // computes it in its pass (Backend::cast_to_fp8_dgelu); else gelu_backward first, in dy.
    void backward(dist::Communicator& tp, int layer, Linear which, const void* dy, const void* x,
                  const void* w, float* dw, float* dbias, void* dx, std::int64_t in,
                  std::int64_t out, const void* gelu_pre, bool tanh_gelu, const void* dy_gelu_pre = nullptr);

    // The parameters changed (or may have): the weights' FP8 copies are made again at their
    // next use. Called before every training and evaluation pass.
    void weights_changed() { std::fill(weight_cast_.begin(), weight_cast_.end(), false); }
    // After a training step's backward: delayed scaling's amax reduction and scale update.
    void end_step(dist::Communicator& tp, dist::Communicator& dp);

    // Delayed scaling's state (operands in layer, linear, operand order; the checkpoint's).
    int operands() const { return static_cast<int>(formats_.size()); }
    const DelayedScaling* delayed() const { return delayed_.get(); }
    void restore(const std::vector<float>& history, const std::vector<float>& scales);
    std::size_t device_bytes() const { return bytes_; }

private:
    int operand(int layer, Linear which, int kind) const;
    // Scale slot i for a cast of x (rows x cols): current scaling computes it here.
    void prepare_scale(dist::Communicator& tp, int i, const void* x, std::int64_t n);
    void upload_scales();
    void* alloc(std::size_t bytes);

    Backend& be_;
    Fp8Options opt_;
    int first_layer_, num_layers_, total_layers_;
    std::int64_t tokens_;
    DType dtype_;
    std::vector<Fp8Format> formats_;   // per operand
    std::unique_ptr<DelayedScaling> delayed_;
    float* amax_ = nullptr;            // device, per operand
    float* scale_ = nullptr;
    float* scale_inv_ = nullptr;
    std::vector<std::uint8_t*> w8_, wt8_;  // per linear: W and W^T codes
    std::vector<bool> weight_cast_;
    std::uint8_t *x8_ = nullptr, *xt8_ = nullptr, *dy8_ = nullptr, *dyt8_ = nullptr;
    std::vector<void*> owned_;
    std::size_t bytes_ = 0;
};

}  // namespace gpt::model
