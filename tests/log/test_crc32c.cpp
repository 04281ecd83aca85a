// CRC-32C against published known answers (the check value of the Castagnoli CRC and the
// iSCSI vectors of RFC 3720, B.4), and TFRecord's masking.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "log/crc32c.hpp"

using gpt::log::crc32c;
using gpt::log::mask_crc32c;

TEST(Crc32c, KnownAnswers) {
    EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
    EXPECT_EQ(crc32c("", 0), 0u);
    std::vector<unsigned char> b(32, 0x00);
    EXPECT_EQ(crc32c(b.data(), b.size()), 0x8A9136AAu);
    std::fill(b.begin(), b.end(), 0xFF);
    EXPECT_EQ(crc32c(b.data(), b.size()), 0x62A8AB43u);
    for (int i = 0; i < 32; ++i) b[i] = static_cast<unsigned char>(i);
    EXPECT_EQ(crc32c(b.data(), b.size()), 0x46DD794Eu);
}

TEST(Crc32c, ContinuesAcrossCalls) {
    const std::string s = "TensorBoard event files";
    const std::uint32_t first = crc32c(s.data(), 7);
    EXPECT_EQ(crc32c(s.data() + 7, s.size() - 7, first), crc32c(s.data(), s.size()));
}

TEST(Crc32c, MaskIsTfRecords) {
    // Values from a bit-by-bit implementation of the CRC and TensorFlow's mask formula.
    const unsigned char zeros[8] = {};
    EXPECT_EQ(mask_crc32c(crc32c(zeros, 8)), 0x07980329u);
    EXPECT_EQ(mask_crc32c(crc32c("123456789", 9)), 0xC78AB0E5u);
    EXPECT_EQ(mask_crc32c(0), 0xA282EAD8u);
}
