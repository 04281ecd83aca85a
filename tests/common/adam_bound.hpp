// How far apart two AdamW runs can end when their gradients differ by a known amount per
// element and step (rounding: other summation orders, other precisions). Shared by the
// parallel matrix (tests/train) and the GPU-vs-CPU training test (tests/backend_cuda).
//
// AdamW's step is u_t = mh_t / (sqrt(vh_t) + eps), with bias-corrected averages
// mh_t = sum_k a_k g_k and vh_t = sum_k b_k g_k^2, a_k = (1-b1) b1^(t-k) / (1-b1^t), b_k the
// same with b2. Cauchy-Schwarz: |mh_t| <= C_t sqrt(vh_t), C_t = sqrt(sum_k a_k^2 / b_k), so
// |u_t| <= C_t for any gradients (1.0 at step 1, 1.01 at step 5 for 0.9/0.999).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace gpt::test {

inline double adam_step_bound(int t, double b1, double b2) {
    double c2 = 0.0;
    for (int k = 1; k <= t; ++k) {
        const double a = (1 - b1) * std::pow(b1, t - k) / (1 - std::pow(b1, t));
        const double b = (1 - b2) * std::pow(b2, t - k) / (1 - std::pow(b2, t));
        c2 += a * a / b;
    }
    return std::sqrt(c2);
}

// Element by element: the reference run's gradients g_t (as Adam sees them: clipped,
// unscaled) and a bound e_t >= |g'_t - g_t| on the other run's. Then
//   |mh' - mh| <= dm = sum_k a_k e_k                       (triangle inequality)
//   |sqrt(vh') - sqrt(vh)| <= ds = sqrt(sum_k b_k e_k^2)   (triangle inequality in the
//                                                           b-weighted 2-norm)
//   |u' - u| <= (dm + |u| ds) / (sqrt(vh) - ds + eps)      (u' - u = (mh' - mh) / (s' + eps)
//                                                           + u (s - s') / (s' + eps))
// and never more than 2 C_t (both steps are within C_t). An element whose gradient is
// round-off itself (the key bias: softmax ignores a shift shared by all keys) gets the 2 C_t
// cap: its steps are round-off divided by round-off. The parameters follow
// p_{t+1} = (1 - lr_t wd) p_t - lr_t u_t, so |dp| grows by at most lr_t |u' - u| a step.
class AdamDifferenceBound {
public:
    AdamDifferenceBound(std::size_t n, double b1, double b2, double eps)
        : b1_(b1), b2_(b2), eps_(eps), m_(n), v_(n), em_(n), ev_(n), dp_(n) {}

    void step(const std::vector<double>& g, const std::vector<double>& e, double lr) {
        ++t_;
        const double c1 = 1 - std::pow(b1_, t_), c2 = 1 - std::pow(b2_, t_);
        const double cap = 2 * adam_step_bound(t_, b1_, b2_);
        for (std::size_t i = 0; i < dp_.size(); ++i) {
            m_[i] = b1_ * m_[i] + (1 - b1_) * g[i];
            v_[i] = b2_ * v_[i] + (1 - b2_) * g[i] * g[i];
            em_[i] = b1_ * em_[i] + (1 - b1_) * e[i];
            ev_[i] = b2_ * ev_[i] + (1 - b2_) * e[i] * e[i];
            const double s = std::sqrt(v_[i] / c2), ds = std::sqrt(ev_[i] / c2), dm = em_[i] / c1;
            const double u = (m_[i] / c1) / (s + eps_);
            double du = cap;
            if (s > ds) du = std::min(cap, (dm + std::abs(u) * ds) / (s - ds + eps_));
            dp_[i] += lr * du;
        }
    }
    // The bound on |p'_i - p_i| after the steps so far.
    const std::vector<double>& parameter_bound() const { return dp_; }

private:
    double b1_, b2_, eps_;
    int t_ = 0;
    std::vector<double> m_, v_, em_, ev_, dp_;
};

}  // namespace gpt::test
