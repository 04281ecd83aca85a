// Philox4x32-10 counter-based RNG (Salmon et al., SC'11) and the dropout keep decision.
//
// Element i of a dropout call is decided by philox(seed, offset + i) alone, so forward and
// backward regenerate the same mask, and results do not depend on tiling or thread count.
// Plain integer code so a CUDA kernel can call the same functions (GPT_HOST_DEVICE).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GPT_HOST_DEVICE __host__ __device__
#else
#define GPT_HOST_DEVICE
#endif

namespace gpt {

struct Philox4x32 {
    std::uint32_t v[4];
};

GPT_HOST_DEVICE inline void philox_mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi,
                                           std::uint32_t& lo) {
    std::uint64_t p = static_cast<std::uint64_t>(a) * b;
    hi = static_cast<std::uint32_t>(p >> 32);
    lo = static_cast<std::uint32_t>(p);
}

// Ten rounds of Philox4x32 on counter (c0..c3) with a 64-bit key.
GPT_HOST_DEVICE inline Philox4x32 philox4x32_10(std::uint32_t c0, std::uint32_t c1,
                                                std::uint32_t c2, std::uint32_t c3,
                                                std::uint64_t key) {
    std::uint32_t k0 = static_cast<std::uint32_t>(key);
    std::uint32_t k1 = static_cast<std::uint32_t>(key >> 32);
    for (int r = 0; r < 10; ++r) {
        std::uint32_t hi0, lo0, hi1, lo1;
        philox_mulhilo(0xD2511F53u, c0, hi0, lo0);
        philox_mulhilo(0xCD9E8D57u, c2, hi1, lo1);
        std::uint32_t n0 = hi1 ^ c1 ^ k0;
        std::uint32_t n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return Philox4x32{{c0, c1, c2, c3}};
}

// The 32 random bits of element `index` of stream `seed`: one Philox block yields 4
// consecutive elements (block = index / 4, lane = index % 4).
GPT_HOST_DEVICE inline std::uint32_t philox_bits(std::uint64_t seed, std::uint64_t index) {
    std::uint64_t block = index >> 2;
    Philox4x32 r = philox4x32_10(static_cast<std::uint32_t>(block),
                                 static_cast<std::uint32_t>(block >> 32), 0u, 0u, seed);
    return r.v[index & 3u];
}

// Drop threshold on the 32-bit draw: element dropped iff bits < threshold, so the drop
// probability is threshold / 2^32 = p rounded to a multiple of 2^-32.
GPT_HOST_DEVICE inline std::uint32_t dropout_threshold(float p) {
    if (!(p > 0.0f)) return 0u;
    if (p >= 1.0f) return 0xffffffffu;
    return static_cast<std::uint32_t>(static_cast<double>(p) * 4294967296.0);
}

GPT_HOST_DEVICE inline bool dropout_keep(std::uint64_t seed, std::uint64_t index,
                                         std::uint32_t threshold) {
    return philox_bits(seed, index) >= threshold;
}

}  // namespace gpt
