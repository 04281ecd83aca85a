// Hopper's warpgroup MMA (lib/backend/cuda/wgmma_sm90.cuh) against a plain host product:
// every swizzle mode, A K-major, M-major and from registers, B K-major and N-major, fp16 and
// bf16, N = 32, 48, 64, 96 and 128, accumulating onto C and overwriting (scale-d = 0). On the emulator
// this checks its descriptor reader and fragment layouts against the test's own tile
// writers; on an sm_90 GPU (labelled gpu: it runs whenever one is lent) the same cases check
// both against the hardware.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/device_info.hpp"
#include "core/half.hpp"
#include "test_env.hpp"
#include "wgmma_test_kernels.hpp"

namespace {

using namespace gpt::test::wgmma;

std::uint16_t to_bits(float v, bool bf16) { return bf16 ? gpt::float_to_bf16_bits(v) : gpt::float_to_half_bits(v); }
float from_bits(std::uint16_t b, bool bf16) { return bf16 ? gpt::bf16_bits_to_float(b) : gpt::half_bits_to_float(b); }

class CudaWgmma : public ::testing::Test {
protected:
    void SetUp() override {
        if (gpt::visible_gpu_count() == 0) {
            gpt::test::note_hardware_skip("no GPU visible");
            GTEST_SKIP() << "no GPU visible";
        }
        const std::string why = unsupported_reason();
        if (!why.empty()) {
            gpt::test::note_hardware_skip(why);
            GTEST_SKIP() << why;
        }
    }
};

// One case: random operands (rounded to the 16-bit type), the device's D against a double
// product of the same values. The products of 16-bit values are exact in fp32, so the only
// error is the fp32 accumulation of kDepth + 1 terms, at most (kDepth + 1) u sum |terms| with
// u = 2^-24; the bound allows 4x that (2^-22), for an accumulation order or internal rounding
// of the tensor cores that differs from the emulator's. A layout error moves whole elements:
// errors of the order of the values themselves.
void check_case(const Case& cs, std::uint32_t seed) {
    SCOPED_TRACE(describe(cs));
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<std::uint16_t> a(std::size_t{kRows} * kDepth), b(std::size_t(kDepth) * cs.n);
    std::vector<float> c(std::size_t(kRows) * cs.n);
    for (auto& v : a) v = to_bits(dist(rng), cs.bf16);
    for (auto& v : b) v = to_bits(dist(rng), cs.bf16);
    for (auto& v : c) v = dist(rng);
    const std::vector<float> d = run(cs, a, b, c);
    int bad = 0;
    for (int r = 0; r < kRows; ++r)
        for (int col = 0; col < cs.n; ++col) {
            double ref = cs.accumulate ? c[r * cs.n + col] : 0.0, mag = std::fabs(ref);
            for (int k = 0; k < kDepth; ++k) {
                const double p = static_cast<double>(from_bits(a[r * kDepth + k], cs.bf16)) *
                                 from_bits(b[k * cs.n + col], cs.bf16);
                ref += p;
                mag += std::fabs(p);
            }
            const double got = d[r * cs.n + col], tol = (kDepth + 1) * std::ldexp(mag, -22);
            if (!(std::fabs(got - ref) <= tol) && bad++ < 5)
                ADD_FAILURE() << "D(" << r << ", " << col << ") = " << got << ", expected " << ref << " (tolerance " << tol
                              << ")";
        }
    EXPECT_EQ(bad, 0) << bad << " of " << kRows * cs.n << " elements wrong";
}

// Each swizzle mode with each source of A and major-ness of B; types, N and scale-d vary
// with them so that every value of each is paired with every layout.
TEST_F(CudaWgmma, MatchesAHostProductInEveryLayout) {
    std::uint32_t seed = 1;
    for (int swizzle : {0, 128, 64, 32})
        for (ASource a : {ASource::KMajor, ASource::MNMajor, ASource::Registers})
            for (bool b_mn : {false, true})
                for (int variant = 0; variant < 4; ++variant) {
                    Case cs;
                    cs.swizzle_bytes = swizzle;
                    cs.a = a;
                    cs.b_mn_major = b_mn;
                    cs.bf16 = variant % 2 == 1;
                    cs.n = variant / 2 == 0 ? 64 : 128;
                    cs.accumulate = (variant + static_cast<int>(a) + (b_mn ? 1 : 0)) % 2 == 0;
                    check_case(cs, seed++);
                    if (HasFailure()) return;  // one broken layout would repeat in every case
                }
}

// N = 96 (head dim 96 as O = P V's N): every swizzle with B K-major, and with B N-major where
// 96 columns are whole swizzle atoms (none, 32 and 64 bytes: 16 and 32 elements; a 128-byte
// atom is 64 elements, so 96 would end inside one, the layout the sm90 forward avoids).
TEST_F(CudaWgmma, N96MatchesAHostProduct) {
    std::uint32_t seed = 500;
    for (int swizzle : {0, 128, 64, 32})
        for (ASource a : {ASource::KMajor, ASource::Registers})
            for (bool b_mn : {false, true}) {
                if (b_mn && swizzle == 128) continue;
                Case cs;
                cs.n = 96;
                cs.swizzle_bytes = swizzle;
                cs.a = a;
                cs.b_mn_major = b_mn;
                cs.bf16 = (swizzle / 32 + static_cast<int>(a)) % 2 == 1;
                cs.accumulate = b_mn;
                check_case(cs, seed++);
                if (HasFailure()) return;
            }
}

// N = 32 and 48 (the dQ column halves of the two-warpgroup attention backward at head dims
// 64 and 96, A M-major, B N-major there): every swizzle with B K-major, and with B N-major
// where N is whole swizzle atoms (as above: 32 elements fill 32- and 64-byte atoms, 48 only
// 32-byte ones); A from each source.
TEST_F(CudaWgmma, N32And48MatchAHostProduct) {
    std::uint32_t seed = 700;
    for (int n : {32, 48})
        for (int swizzle : {0, 128, 64, 32})
            for (ASource a : {ASource::KMajor, ASource::MNMajor, ASource::Registers})
                for (bool b_mn : {false, true}) {
                    if (b_mn && swizzle != 0 && (2 * n) % swizzle != 0) continue;
                    Case cs;
                    cs.n = n;
                    cs.swizzle_bytes = swizzle;
                    cs.a = a;
                    cs.b_mn_major = b_mn;
                    cs.bf16 = (swizzle / 32 + static_cast<int>(a) + n / 16) % 2 == 1;
                    cs.accumulate = (static_cast<int>(a) + (b_mn ? 1 : 0)) % 2 == 0;
                    check_case(cs, seed++);
                    if (HasFailure()) return;
                }
}

// Attention's two products as FA3 chains them: S = Q K^T with both from shared memory, P = S
// rounded to 16 bits in registers, O = P V with V N-major. The reference rounds the exact S;
// the device's fp32 S can round to the neighbouring 16-bit value where S lies near a
// rounding boundary, so P may differ by one ulp (2^-8 |S| relative in bf16, 2^-11 in fp16) on
// top of each product's fp32 accumulation (as above). A P fragment out of place moves whole
// products.
void check_chain(bool bf16, int n, int swizzle, std::uint32_t seed, bool use_tma = false) {
    SCOPED_TRACE(std::string(bf16 ? "bf16" : "fp16") + " n " + std::to_string(n) + " swizzle " + std::to_string(swizzle) +
                 (use_tma ? " TMA" : ""));
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<std::uint16_t> q(std::size_t{kRows} * kDepth), k(std::size_t{64} * kDepth), v(std::size_t{64} * n);
    for (auto& x : q) x = to_bits(dist(rng), bf16);
    for (auto& x : k) x = to_bits(dist(rng), bf16);
    for (auto& x : v) x = to_bits(dist(rng), bf16);
    const std::vector<float> o = run_chain(bf16, n, swizzle, q, k, v, use_tma);
    const double ulp = std::ldexp(1.0, bf16 ? -8 : -11);
    int bad = 0;
    for (int r = 0; r < kRows; ++r) {
        double p[64], s_abs[64];
        for (int j = 0; j < 64; ++j) {
            double sv = 0.0, mag = 0.0;
            for (int d = 0; d < kDepth; ++d) {
                const double x = static_cast<double>(from_bits(q[r * kDepth + d], bf16)) * from_bits(k[j * kDepth + d], bf16);
                sv += x;
                mag += std::fabs(x);
            }
            p[j] = from_bits(to_bits(static_cast<float>(sv), bf16), bf16);
            s_abs[j] = std::fabs(sv) + (kDepth + 1) * std::ldexp(mag, -22);  // |S| with the device's error
        }
        for (int col = 0; col < n; ++col) {
            double ref = 0.0, mag = 0.0, p_err = 0.0;
            for (int j = 0; j < 64; ++j) {
                const double vj = from_bits(v[j * n + col], bf16);
                ref += p[j] * vj;
                mag += std::fabs(p[j] * vj);
                p_err += (ulp * s_abs[j] + (kDepth + 1) * std::ldexp(s_abs[j], -22)) * std::fabs(vj);
            }
            const double got = o[r * n + col], tol = p_err + 65 * std::ldexp(mag, -22);
            if (!(std::fabs(got - ref) <= tol) && bad++ < 5)
                ADD_FAILURE() << "O(" << r << ", " << col << ") = " << got << ", expected " << ref << " (tolerance " << tol
                              << ")";
        }
    }
    EXPECT_EQ(bad, 0) << bad << " of " << kRows * n << " elements wrong";
}

TEST_F(CudaWgmma, ChainsQKTransposedThroughRegistersIntoPV) {
    std::uint32_t seed = 1000;
    for (int swizzle : {128, 0})
        for (bool bf16 : {false, true})
            for (int n : {64, 128}) check_chain(bf16, n, swizzle, seed++);
}

// The same chain with Q, K and V loaded by TMA (128-byte swizzled 64 x 64 boxes) on one
// mbarrier, reused for V in its second phase: the tensor map's swizzle must be the one
// wgmma's descriptors read.
TEST_F(CudaWgmma, TmaLoadsTheTilesWgmmaReads) {
    std::uint32_t seed = 2000;
    for (bool bf16 : {false, true})
        for (int n : {64, 128}) check_chain(bf16, n, 128, seed++, true);
}

}  // namespace
