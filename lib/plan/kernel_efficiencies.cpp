#include "plan/kernel_efficiencies.hpp"

#include "core/errors.hpp"

namespace gpt::plan {

FlashAttentionRate flash_rate_from_bench(int head_dim, double fwd_tflops, double fwd_bwd_tflops,
                                         double peak_tflops) {
    GPT_ASSERT(fwd_tflops > 0 && fwd_bwd_tflops > 0 && peak_tflops > 0);
    // Times per unit of X = b s^2 h, in 1/TFLOP/s: forward 2X at fwd_tflops, forward +
    // backward 3.5 x 2X at fwd_bwd_tflops.
    const double fwd = 2.0 / fwd_tflops, bwd = 7.0 / fwd_bwd_tflops - fwd;
    GPT_ASSERT(bwd > 0, "forward + backward faster than the forward alone");
    return {head_dim, 4.0 / fwd / peak_tflops, 8.0 / bwd / peak_tflops};
}

double gemm_efficiency_from_rate(double tflops, double gflop, double peak_tflops, double half_gflop) {
    GPT_ASSERT(gflop > 0 && peak_tflops > 0);
    return tflops / peak_tflops * (gflop + half_gflop) / gflop;
}

FlashAttentionRate KernelEfficiencies::flash(int head_dim) const {
    const auto& t = flash_by_head_dim;
    if (t.empty()) return {head_dim, flash_attention, flash_attention};
    if (head_dim <= t.front().head_dim) return {head_dim, t.front().forward, t.front().backward};
    for (std::size_t i = 1; i < t.size(); ++i) {
        if (head_dim > t[i].head_dim) continue;
        const double w = double(head_dim - t[i - 1].head_dim) / (t[i].head_dim - t[i - 1].head_dim);
        return {head_dim, t[i - 1].forward + w * (t[i].forward - t[i - 1].forward),
                t[i - 1].backward + w * (t[i].backward - t[i - 1].backward)};
    }
    return {head_dim, t.back().forward, t.back().backward};
}

}  // namespace gpt::plan
