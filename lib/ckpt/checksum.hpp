// Position-weighted linear checksum of a dataset's stored bytes:
//   checksum = sum over 4-byte little-endian words j of  word_j * h(j)   (mod p = 2^61 - 1)
// with h(j) a fixed pseudo-random weight in [1, p): h(j) = t[j mod 2048] * s(j / 2048) mod p,
// t a table of mixed 32-bit values, s a mixed 61-bit value. The inner loop is a SIMD dot
// product of words with the table; the block factor costs one modular multiply per 8 KiB.
// Linear in the bytes, so any set of ranks can checksum disjoint pieces of a tensor (any
// hyperslab or flat range, even pieces that split a word) and the sum of their partial
// checksums, mod p, is the checksum of the whole: no rank ever needs the whole tensor.
// p is prime and words are below p, so a change confined to one word always changes the
// checksum; a change spread over several words escapes with probability about 1/p. (Modulo
// 2^64 instead, two flipped top bits would cancel.) Position weighting catches swapped or
// shifted blocks that a plain sum would miss.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpt::ckpt {

inline constexpr std::uint64_t kChecksumPrime = (std::uint64_t{1} << 61) - 1;

// Partial checksum of `n` bytes that sit at byte offset `byte_offset` of the dataset.
std::uint64_t checksum_bytes(std::uint64_t byte_offset, const void* bytes, std::size_t n);

// Sum of two partial checksums.
inline std::uint64_t checksum_add(std::uint64_t a, std::uint64_t b) {
    const std::uint64_t s = a + b;  // both < 2^61: no overflow
    return s >= kChecksumPrime ? s - kChecksumPrime : s;
}

}  // namespace gpt::ckpt
