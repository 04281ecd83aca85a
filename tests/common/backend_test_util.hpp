// Helpers for the backend tests: typed device buffers filled from fp64 host data, NaN
// poisoning, random data, and a closeness check that fails on NaN.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/half.hpp"

namespace gpt::test {

inline std::unique_ptr<Backend> cpu_backend() { return make_backend("cpu", 0); }

// Relative tolerances that correspond to a few units of the storage type's rounding.
struct Tol {
    double rtol, atol;
};
inline Tol tol_for(DType t, double scale = 1.0) {
    switch (t) {
        case DType::F32: return {2e-5 * scale, 2e-6 * scale};
        case DType::F16: return {4e-3 * scale, 1e-3 * scale};
        case DType::BF16: return {3e-2 * scale, 8e-3 * scale};
    }
    return {0, 0};
}

inline std::string dname(DType t) { return std::string(dtype_name(t)); }

// Rounds v to the storage precision of t (what the backend sees as its input).
inline double round_to(DType t, double v) {
    float f = static_cast<float>(v);
    switch (t) {
        case DType::F32: return f;
        case DType::F16: return half_bits_to_float(float_to_half_bits(f));
        case DType::BF16: return bf16_bits_to_float(float_to_bf16_bits(f));
    }
    return f;
}

// A buffer of n elements of type t in backend memory.
class Buf {
public:
    Buf(Backend& be, DType t, std::size_t n) : be_(&be), t_(t), n_(n) {
        p_ = be.alloc(std::max<std::size_t>(n, 1) * dtype_size(t));
        poison();
    }
    Buf(Backend& be, DType t, const std::vector<double>& v) : Buf(be, t, v.size()) { set(v); }
    ~Buf() { be_->free(p_); }
    Buf(const Buf&) = delete;
    Buf& operator=(const Buf&) = delete;

    void* p() { return p_; }
    const void* p() const { return p_; }
    float* f32() { return static_cast<float*>(p_); }
    std::size_t size() const { return n_; }

    // All-ones bits: NaN in fp32, fp16 and bf16, so unwritten elements show.
    void poison() { std::memset(p_, 0xff, n_ * dtype_size(t_)); }

    void set(const std::vector<double>& v) {
        ASSERT_EQ(v.size(), n_);
        for (std::size_t i = 0; i < n_; ++i) {
            float f = static_cast<float>(v[i]);
            switch (t_) {
                case DType::F32: static_cast<float*>(p_)[i] = f; break;
                case DType::F16: static_cast<Half*>(p_)[i] = from_float<Half>(f); break;
                case DType::BF16: static_cast<BFloat16*>(p_)[i] = from_float<BFloat16>(f); break;
            }
        }
    }
    std::vector<double> get() const {
        std::vector<double> v(n_);
        for (std::size_t i = 0; i < n_; ++i) {
            switch (t_) {
                case DType::F32: v[i] = static_cast<const float*>(p_)[i]; break;
                case DType::F16: v[i] = to_float(static_cast<const Half*>(p_)[i]); break;
                case DType::BF16: v[i] = to_float(static_cast<const BFloat16*>(p_)[i]); break;
            }
        }
        return v;
    }

private:
    Backend* be_;
    DType t_;
    std::size_t n_;
    void* p_;
};

inline std::vector<double> random_vec(std::size_t n, std::uint32_t seed, double lo = -1.0,
                                      double hi = 1.0) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<double> v(n);
    for (auto& x : v) x = d(gen);
    return v;
}

// Values as the backend will see them after storing in dtype t.
inline std::vector<double> rounded(DType t, std::vector<double> v) {
    for (auto& x : v) x = round_to(t, x);
    return v;
}

// Every element within atol + rtol*|expected|; NaN or Inf where a finite value is expected
// fails (the comparison is false). Reports the first few mismatches.
inline ::testing::AssertionResult all_close(const std::vector<double>& actual,
                                            const std::vector<double>& expected, Tol tol) {
    if (actual.size() != expected.size())
        return ::testing::AssertionFailure()
               << "size " << actual.size() << " != " << expected.size();
    int bad = 0;
    std::size_t first = 0;
    double worst = 0.0;
    for (std::size_t i = 0; i < actual.size(); ++i) {
        double err = std::abs(actual[i] - expected[i]);
        bool ok = err <= tol.atol + tol.rtol * std::abs(expected[i]);
        if (!ok) {
            if (bad == 0) first = i;
            ++bad;
        }
        if (!(err <= worst)) worst = err;
    }
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << bad << " of " << actual.size() << " elements differ; first at " << first
           << ": got " << actual[first] << " expected " << expected[first]
           << " (max abs err " << worst << ", rtol " << tol.rtol << ", atol " << tol.atol
           << ")";
}

// Error bounds (issue 18): a result is compared with an fp64 reference computed from the
// same rounded inputs, element by element against a bound derived for the operation, not
// against a tolerance that happened to pass.
//
// Unit roundoff u of a storage type: round-to-nearest of x is x(1 + d) with |d| <= u.
inline double unit_roundoff(DType t) {
    switch (t) {
        case DType::F32: return std::ldexp(1.0, -24);
        case DType::F16: return std::ldexp(1.0, -11);
        case DType::BF16: return std::ldexp(1.0, -8);
    }
    return 0.0;
}
// The absolute error of rounding near zero: half the smallest subnormal (fp16's 2^-24
// matters for small outputs; the others' are far below anything we compare).
inline double underflow_error(DType t) {
    switch (t) {
        case DType::F32: return std::ldexp(1.0, -150);
        case DType::F16: return std::ldexp(1.0, -25);
        case DType::BF16: return std::ldexp(1.0, -134);
    }
    return 0.0;
}
// Rounding the exact value e to t: at most u |e| + the underflow error.
inline double output_rounding(DType t, double e) {
    return unit_roundoff(t) * std::abs(e) + underflow_error(t);
}

// Every |actual - exact| <= bound (elementwise); NaN fails. Reports the first few and the
// largest error relative to its bound.
inline ::testing::AssertionResult within_bound(const std::vector<double>& actual,
                                               const std::vector<double>& exact,
                                               const std::vector<double>& bound) {
    if (actual.size() != exact.size() || bound.size() != exact.size())
        return ::testing::AssertionFailure() << "sizes " << actual.size() << ", " << exact.size()
                                             << ", " << bound.size();
    int bad = 0;
    std::size_t first = 0, worst_at = 0;
    double worst = 0.0;
    for (std::size_t i = 0; i < actual.size(); ++i) {
        const double err = std::abs(actual[i] - exact[i]);
        if (!(err <= bound[i])) {
            if (bad == 0) first = i;
            ++bad;
        }
        const double ratio = err / bound[i];
        if (!(ratio <= worst)) {
            worst = ratio;
            worst_at = i;
        }
    }
    // GPT_TEST_SHOW_BOUNDS=1 prints how much of each bound a passing result uses.
    if (bad == 0 && std::getenv("GPT_TEST_SHOW_BOUNDS"))
        std::printf("within_bound: worst error %.3g of its bound (n=%zu)\n", worst, actual.size());
    if (bad == 0) return ::testing::AssertionSuccess() << "worst error " << worst << " of its bound";
    return ::testing::AssertionFailure()
           << bad << " of " << actual.size() << " elements beyond their error bound; first at "
           << first << ": got " << actual[first] << " exact " << exact[first] << " bound "
           << bound[first] << "; worst at " << worst_at << ": " << worst << " times its bound";
}

inline const DType kAllTypes[] = {DType::F32, DType::F16, DType::BF16};

}  // namespace gpt::test
