// How closely an fp32 run on another (TP, PP, DP) layout must follow the one-rank run: a
// bound derived from the reductions a layout may reorder, propagated through AdamW from the
// gradients the one-rank run measured (no tolerance picked by hand).
#pragma once

#include <string>

#include "config/config.hpp"
#include "parallel_match.hpp"

namespace gpt::test {

// Relative difference bounds of one fp32 forward and forward + backward pass of `cfg`'s model
// between two layouts. A sum of k terms, computed in two orders, differs by at most
// 2 gamma_k sum|terms| (gamma_k = k u / (1 - k u), u = 2^-24: each order is within gamma_k of
// the exact sum). Every reduction a layout can reorder is counted along the longest chain (a
// first layer's weight gradient passes through every layer forward and back): each GEMM's
// inner dimension (the BLAS blocking follows the split shapes, and row-parallel sums are cut
// into TP partial sums), the vocab-parallel softmax and head input gradient, the token sums
// of the weight gradients (cut over DP replicas and, with sequence parallelism, over TP), the
// tied-embedding pair and the loss mean. Identical element-wise ops (activations, dropout's
// multiply, layernorm over the full hidden dimension) round identical inputs identically
// and add nothing.
struct LayoutRounding {
    double forward = 0.0;  // relative, on the loss
    double total = 0.0;    // relative, on each gradient element (with the tensor's scale)
};
LayoutRounding layout_rounding(const Config& cfg);

// The parallel run `got` follows the one-rank run `ref` (trained with keep_step_grads) within
// the propagated bound:
//  - gradients: |g' - g| <= (delta + rho_t) (|g| + rms_T(g)) + delta |g| per element of
//    tensor T at step t. delta (layout_rounding().total) scales each element's magnitude;
//    rms_T stands in for the element's sum of |terms| where its own value has cancelled.
//    rho_t = ||dp_{t-1}|| / ||p|| is the parameters' relative difference so far, fed back with
//    gain 1 (first order). The last term: the clip coefficient, computed from a norm that
//    differs by at most delta relative, scales the whole gradient.
//  - parameters: AdamDifferenceBound (adam_bound.hpp) from the clipped g and e, per element;
//  - grad norm: | ||g'|| - ||g|| | <= ||e_t||;
//  - lm loss of iteration t: forward delta L_t + ||grad L_t|| ||dp_{t-1}|| (first order in the
//    parameters' difference, Cauchy-Schwarz); the evaluation loss likewise with the largest
//    training grad norm.
// Prints the largest used fraction of each bound, so the log shows the slack.
void expect_within_rounding_bound(const Run& ref, const Run& got, const Config& cfg, const std::string& what);

}  // namespace gpt::test
