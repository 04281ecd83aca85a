#include "ckpt/checksum.hpp"

#include <algorithm>
#include <cstring>

namespace gpt::ckpt {

namespace {

using u128 = unsigned __int128;

// x mod (2^61 - 1) for x < 2^125, by folding the bits above 61 onto the low bits.
inline std::uint64_t reduce(u128 x) {
    const std::uint64_t lo = static_cast<std::uint64_t>(x) & kChecksumPrime;
    const std::uint64_t hi = static_cast<std::uint64_t>(x >> 61);
    std::uint64_t r = lo + (hi & kChecksumPrime) + (hi >> 61);
    r = (r & kChecksumPrime) + (r >> 61);
    return r >= kChecksumPrime ? r - kChecksumPrime : r;
}

// A bijective 64-bit mix of x cut to 61 bits, in [1, p).
inline std::uint64_t mix61(std::uint64_t x) {
    x = (x + 1) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 32;
    x >>= 3;
    if (x >= kChecksumPrime) x -= kChecksumPrime;
    return x == 0 ? 1 : x;
}

constexpr std::uint64_t kBlockWords = 2048;

// Inner weights below 2^32, so word * weight fits 64 bits and the inner loop vectorises
// (32x32->64 multiplies); the 61-bit block factor restores the full range.
struct WeightTable {
    std::uint32_t t[kBlockWords];
    WeightTable() {
        for (std::uint64_t i = 0; i < kBlockWords; ++i) {
            const auto v = static_cast<std::uint32_t>(mix61(i ^ 0x5bd1e995ull));
            t[i] = v == 0 ? 1 : v;
        }
    }
};
const WeightTable& table() {
    static const WeightTable tab;  // thread-safe one-time initialisation
    return tab;
}
inline std::uint64_t block_factor(std::uint64_t block) { return mix61(block); }
inline std::uint64_t mulmod(std::uint64_t a, std::uint64_t b) { return reduce(u128(a) * b); }
inline std::uint64_t weight(std::uint64_t j) {
    return mulmod(table().t[j % kBlockWords], block_factor(j / kBlockWords));
}

// sum of w[i] * t[i] for n <= kBlockWords words, exactly (below 2^75), reduced mod p.
// The low and high 32-bit halves of the products are summed apart (each sum stays below
// 2^43), a form compilers turn into SIMD multiplies and adds.
std::uint64_t block_dot(const unsigned char* p, const std::uint32_t* t, std::size_t n) {
    std::uint64_t lo = 0, hi = 0;
    for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t w;
        std::memcpy(&w, p + 4 * i, 4);
        const std::uint64_t prod = std::uint64_t(w) * t[i];
        lo += prod & 0xffffffffu;
        hi += prod >> 32;
    }
    return reduce((u128(hi) << 32) + lo);
}

// Bytes of a partial word, shifted to their little-endian position inside that word, so a
// word split between two callers contributes the same total as the whole word.
inline std::uint64_t partial_word(const unsigned char* p, std::size_t n, unsigned first_byte) {
    std::uint64_t w = 0;
    for (std::size_t k = 0; k < n; ++k) w |= std::uint64_t(p[k]) << (8 * (first_byte + k));
    return w;
}

}  // namespace

std::uint64_t checksum_bytes(std::uint64_t byte_offset, const void* bytes, std::size_t n) {
    static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "checksum assumes a little-endian host");
    const auto* p = static_cast<const unsigned char*>(bytes);
    std::uint64_t word = byte_offset / 4;
    u128 acc = 0;
    const unsigned head_pos = static_cast<unsigned>(byte_offset % 4);
    if (head_pos != 0 && n > 0) {
        const std::size_t take = std::min<std::size_t>(n, 4 - head_pos);
        acc += u128(partial_word(p, take, head_pos)) * weight(word);
        p += take;
        n -= take;
        ++word;
    }
    // Block by block: the exact dot product of the words with the inner weights, then one
    // modular multiply by the block's factor.
    const std::uint32_t* t = table().t;
    std::uint64_t result = 0;
    while (n >= 4) {
        const std::uint64_t in_block = word % kBlockWords;
        const std::size_t words = std::min<std::size_t>(n / 4, kBlockWords - in_block);
        const std::uint64_t block_sum = block_dot(p, t + in_block, words);
        result = checksum_add(result, mulmod(block_sum, block_factor(word / kBlockWords)));
        p += 4 * words;
        n -= 4 * words;
        word += words;
    }
    if (n > 0) acc += u128(partial_word(p, n, 0)) * weight(word);
    return checksum_add(result, reduce(acc));
}

}  // namespace gpt::ckpt
