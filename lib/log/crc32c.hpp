// CRC-32C (Castagnoli), the checksum TFRecord framing uses, and TensorFlow's masking of it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpt::log {

// CRC-32C of n bytes (reflected polynomial 0x82F63B78, init and final xor 0xFFFFFFFF);
// crc32c("123456789") = 0xE3069283. `crc` continues a previous call's result.
std::uint32_t crc32c(const void* data, std::size_t n, std::uint32_t crc = 0);

// TFRecord stores masked CRCs, so that a CRC of data that itself holds CRCs stays well mixed:
// rotate right by 15 bits, add 0xa282ead8.
constexpr std::uint32_t mask_crc32c(std::uint32_t crc) {
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace gpt::log
