// Factory, memory accounting, AdamW against a scalar fp64 reference, grad_stats and sum.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backend_test_util.hpp"
#include "core/errors.hpp"

namespace gpt::test {
namespace {

TEST(Factory, CpuAlwaysCudaOnlyWhenBuilt) {
    auto be = make_backend("cpu", 0);
    ASSERT_TRUE(be);
    EXPECT_EQ(be->name(), "cpu");
    EXPECT_TRUE(be->host_memory());
#if !GPT_HAVE_CUDA
    EXPECT_THROW(make_backend("cuda", 0), UsageError);
#endif
    EXPECT_THROW(make_backend("tpu", 0), UsageError);
}

TEST(Memory, AlignedAndAccounted) {
    auto be = cpu_backend();
    EXPECT_EQ(be->bytes_in_use(), 0u);
    void* a = be->alloc(1000);
    void* b = be->alloc(3);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b) % 64, 0u);
    EXPECT_EQ(be->bytes_in_use(), 1003u);
    be->free(a);
    EXPECT_EQ(be->bytes_in_use(), 3u);
    void* c = be->alloc(500);
    EXPECT_EQ(be->peak_bytes(), 1003u);
    be->free(b);
    be->free(c);
    EXPECT_EQ(be->bytes_in_use(), 0u);
    EXPECT_EQ(be->peak_bytes(), 1003u);
    EXPECT_THROW(be->free(reinterpret_cast<void*>(0x40)), InternalError);
}

TEST(Memory, CopiesAndZero) {
    auto be = cpu_backend();
    std::vector<float> host = {1, 2, 3, 4, 5};
    float* d = static_cast<float*>(be->alloc(20));
    float* e = static_cast<float*>(be->alloc(20));
    be->copy_to_device(d, host.data(), 20);
    be->copy(e, d, 20);
    std::vector<float> back(5, -1);
    be->copy_to_host(back.data(), e, 20);
    EXPECT_EQ(back, host);
    be->zero(e, 8);
    be->copy_to_host(back.data(), e, 20);
    EXPECT_EQ(back, (std::vector<float>{0, 0, 3, 4, 5}));
    be->synchronize();
    be->free(d);
    be->free(e);
}

// Copies large enough to be split over the OpenMP threads (2 MiB and more): every byte lands
// at its place, with a ragged last chunk and byte offsets that are not chunk-aligned.
TEST(Memory, LargeCopiesSplitOverThreadsLandWhole) {
    auto be = cpu_backend();
    const int threads = omp_get_max_threads();
    omp_set_num_threads(2);
    const std::size_t bytes = (std::size_t{9} << 20) + 12345;
    std::vector<unsigned char> host(bytes + 3), back(bytes + 3, 0);
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(i * 2654435761u >> 13);
    auto* d = static_cast<unsigned char*>(be->alloc(bytes + 3));
    be->copy_to_device(d + 1, host.data() + 3, bytes);
    be->copy_to_host(back.data() + 2, d + 1, bytes);
    omp_set_num_threads(threads);
    EXPECT_EQ(0, std::memcmp(back.data() + 2, host.data() + 3, bytes));
    EXPECT_EQ(back[0], 0);
    EXPECT_EQ(back[1], 0);
    EXPECT_EQ(back[bytes + 2], 0);  // nothing past the end
    be->free(d);
}

struct AdamRef {
    std::vector<double> p, m, v;
    void step(const std::vector<double>& g, double lr, double b1, double b2, double eps,
              double wd, int t, double gs) {
        for (std::size_t i = 0; i < p.size(); ++i) {
            double gi = g[i] * gs;
            p[i] *= 1.0 - lr * wd;  // torch.optim.AdamW: decay first, on the old weights
            m[i] = b1 * m[i] + (1 - b1) * gi;
            v[i] = b2 * v[i] + (1 - b2) * gi * gi;
            double mh = m[i] / (1 - std::pow(b1, t)), vh = v[i] / (1 - std::pow(b2, t));
            p[i] -= lr * mh / (std::sqrt(vh) + eps);
        }
    }
};

class AdamTest : public ::testing::TestWithParam<DType> {};

TEST_P(AdamTest, MatchesScalarReferenceOverSteps) {
    const DType mt = GetParam();
    auto be = cpu_backend();
  for (std::size_t n : {std::size_t{2053}, std::size_t{(1 << 20) + 1}}) {  // ragged tails
    AdamRef ref{rounded(DType::F32, random_vec(n, 1)), std::vector<double>(n, 0.0),
                std::vector<double>(n, 0.0)};
    Buf p(*be, DType::F32, ref.p), m(*be, DType::F32, ref.m), v(*be, DType::F32, ref.v);
    Buf g(*be, DType::F32, n), model(*be, mt, n);
    const double lr = 1e-2, wd = 0.1, gs = 0.5;
    for (int t = 1; t <= 6; ++t) {
        auto grad = rounded(DType::F32, random_vec(n, 100 + t, -2.0, 2.0));
        g.set(grad);
        model.poison();
        AdamArgs a;
        a.main_param = p.f32();
        a.grad = g.f32();
        a.exp_avg = m.f32();
        a.exp_avg_sq = v.f32();
        // fp32 models: no copy on odd steps (master weights are the model), a separate fp32
        // copy on even steps.
        const bool copy = mt != DType::F32 || t % 2 == 0;
        a.model_param = copy ? model.p() : nullptr;
        a.model_dtype = mt;
        a.n = static_cast<std::int64_t>(n);
        a.lr = static_cast<float>(lr);
        a.beta1 = 0.9f;
        a.beta2 = 0.95f;
        a.eps = 1e-8f;
        a.weight_decay = static_cast<float>(wd);
        a.step = t;
        a.grad_scale = static_cast<float>(gs);
        be->adam_step(a);
        ref.step(grad, lr, 0.9f, 0.95f, 1e-8f, wd, t, gs);
        ASSERT_TRUE(all_close(p.get(), ref.p, {1e-5, 1e-6})) << "step " << t;
        ASSERT_TRUE(all_close(m.get(), ref.m, {1e-5, 1e-7})) << "step " << t;
        ASSERT_TRUE(all_close(v.get(), ref.v, {1e-5, 1e-8})) << "step " << t;
        if (copy) {
            ASSERT_TRUE(all_close(model.get(), rounded(mt, p.get()), {0, 0}))
                << "model copy is the (rounded) master weight, step " << t;
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ModelTypes, AdamTest, ::testing::ValuesIn(kAllTypes),
                         [](const auto& info) { return dname(info.param); });

TEST(GradStats, SumOfSquaresAndFiniteness) {
    auto be = cpu_backend();
    for (std::size_t n : {1u, 1000u, 70001u, (1u << 20) + 9}) {
        auto x = rounded(DType::F32, random_vec(n, 3, -3.0, 3.0));
        std::int64_t zeros = 0;  // every 7th element +0 or -0 (both count, as torch.count_nonzero's)
        for (std::size_t i = 0; i < n; i += 7, ++zeros) x[i] = (i / 7) % 2 ? -0.0 : 0.0;
        Buf b(*be, DType::F32, x);
        double ss = 0, s = 0;
        for (double e : x) {
            ss += e * e;
            s += e;
        }
        GradStats st = be->grad_stats(b.f32(), static_cast<std::int64_t>(n));
        EXPECT_TRUE(st.finite);
        EXPECT_NEAR(st.sum_squares, ss, 1e-6 * ss);
        EXPECT_EQ(st.zeros, zeros);
        EXPECT_NEAR(be->sum(b.f32(), static_cast<std::int64_t>(n)), s, 1e-9 * n);
        // Large but finite values must not overflow the sum of squares.
        b.f32()[0] = 3e30f;
        st = be->grad_stats(b.f32(), static_cast<std::int64_t>(n));
        EXPECT_TRUE(st.finite);
        EXPECT_TRUE(std::isfinite(st.sum_squares));
        for (float bad : {std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()}) {
            b.f32()[n - 1] = bad;
            EXPECT_FALSE(be->grad_stats(b.f32(), static_cast<std::int64_t>(n)).finite);
            b.f32()[n - 1] = 0.0f;
        }
    }
}

}  // namespace
}  // namespace gpt::test
