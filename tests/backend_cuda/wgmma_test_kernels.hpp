// Host side of the wgmma layout test (wgmma_test_kernels.cu): one block of two warpgroups
// computes D (128 x n) = A (128 x 64) B (64 x n) [+ C] with wgmma.mma_async m64nNk16, four k
// steps, operands in shared memory in the layout a case names. The same test runs on the CPU
// emulator and, when one is lent, on an sm_90 GPU: there it checks the emulator's reading of
// the descriptors, swizzles and fragments against the hardware.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpt::test::wgmma {

enum class ASource { KMajor, MNMajor, Registers };

struct Case {
    bool bf16 = false;
    int n = 64;              // 64, 96 or 128
    int swizzle_bytes = 0;   // 0 (no swizzle), 32, 64 or 128, for A's and B's tiles alike
    ASource a = ASource::KMajor;
    bool b_mn_major = false; // B N-major (as V in P V) instead of K-major (as K in Q K^T)
    bool accumulate = false; // D = A B + C; otherwise scale-d = 0 on the first k step: D = A B
};
std::string describe(const Case& c);

// "" when the device can run the kernel (an sm_90 GPU, or the emulator), else why not.
std::string unsupported_reason();

constexpr int kRows = 128, kDepth = 64;
// a: kRows x kDepth and b: kDepth x n row-major 16-bit patterns (fp16 or bf16), c: kRows x n.
// Returns D, kRows x n row-major. Throws std::runtime_error on a CUDA error.
std::vector<float> run(const Case& c, const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b,
                       const std::vector<float>& cmat);

// Attention's chain: S = Q K^T (Q: kRows x kDepth, K: 64 x kDepth, both K-major), P = S
// rounded to the 16-bit type in registers (accumulators_to_a), O = P V (V: 64 x n, N-major,
// A from registers). Tiles swizzled by `swizzle_bytes`, written by the threads or, with
// use_tma (128-byte swizzle only), loaded by TMA on an mbarrier. Returns O, kRows x n.
std::vector<float> run_chain(bool bf16, int n, int swizzle_bytes, const std::vector<std::uint16_t>& q,
                             const std::vector<std::uint16_t>& k, const std::vector<std::uint16_t>& v, bool use_tma);

}  // namespace gpt::test::wgmma
