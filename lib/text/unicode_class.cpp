// Two-stage lookup tables over the generated category ranges: 4352 blocks of 256 code
// points, identical blocks shared, so a lookup is two loads and a table stays ~40 KB.
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/unicode_tables.hpp"

namespace gpt::data::unicode {

namespace {

constexpr std::uint32_t kMaxCodePoint = 0x10FFFF;
constexpr std::uint32_t kBlockBits = 8;
constexpr std::uint32_t kBlockSize = 1u << kBlockBits;
constexpr std::uint32_t kNumBlocks = (kMaxCodePoint + 1) >> kBlockBits;

bool is_white_space(std::uint32_t cp) {
    // Unicode's White_Space property (PropList.txt); stable since Unicode 6.3.
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

// One byte per code point, compressed; built from a flat array filled by `fill`.
struct Table {
    std::vector<std::uint16_t> block_of;   // [kNumBlocks]: index into blocks
    std::vector<std::uint8_t> blocks;      // [num_unique_blocks * kBlockSize]

    template <typename Fill>
    explicit Table(Fill&& fill) {
        std::vector<std::uint8_t> flat(kMaxCodePoint + 1, 0);
        fill(flat);
        block_of.resize(kNumBlocks);
        std::unordered_map<std::string, std::uint16_t> seen;
        for (std::uint32_t b = 0; b < kNumBlocks; ++b) {
            std::string block(flat.begin() + b * kBlockSize, flat.begin() + (b + 1) * kBlockSize);
            auto [it, inserted] = seen.emplace(block, static_cast<std::uint16_t>(seen.size()));
            if (inserted) blocks.insert(blocks.end(), block.begin(), block.end());
            block_of[b] = it->second;
        }
    }

    std::uint8_t at(std::uint32_t cp) const {
        if (cp > kMaxCodePoint) return 0;
        return blocks[(static_cast<std::size_t>(block_of[cp >> kBlockBits]) << kBlockBits) | (cp & (kBlockSize - 1))];
    }
};

// Sets (or ors in) value for every code point of the ranges.
void paint(std::vector<std::uint8_t>& flat, const CodePointRange* r, std::size_t n, std::uint8_t value, bool or_in) {
    for (std::size_t i = 0; i < n; ++i)
        for (std::uint32_t cp = r[i].first; cp <= r[i].last; ++cp) flat[cp] = or_in ? (flat[cp] | value) : value;
}

const Table& class_table() {
    static const Table t([](std::vector<std::uint8_t>& flat) {
        paint(flat, kLetterRanges, kLetterRanges_count, static_cast<std::uint8_t>(CharClass::Letter), false);
        paint(flat, kNumberRanges, kNumberRanges_count, static_cast<std::uint8_t>(CharClass::Number), false);
        for (std::uint32_t cp = 0; cp <= 0x3000; ++cp)
            if (is_white_space(cp)) flat[cp] = static_cast<std::uint8_t>(CharClass::Space);
    });
    return t;
}

const Table& tik_table() {
    static const Table t([](std::vector<std::uint8_t>& flat) {
        paint(flat, kLetterRanges, kLetterRanges_count, kTikL, true);
        paint(flat, kNumberRanges, kNumberRanges_count, kTikN, true);
        for (std::uint32_t cp = 0; cp <= 0x3000; ++cp)
            if (is_white_space(cp)) flat[cp] |= kTikSpace;
        const std::uint8_t both = kTikUpper | kTikLower;
        paint(flat, kLuRanges, kLuRanges_count, kTikUpper, true);
        paint(flat, kLtRanges, kLtRanges_count, kTikUpper, true);
        paint(flat, kLlRanges, kLlRanges_count, kTikLower, true);
        paint(flat, kLmRanges, kLmRanges_count, both, true);
        paint(flat, kLoRanges, kLoRanges_count, both, true);
        paint(flat, kMRanges, kMRanges_count, both, true);
    });
    return t;
}

}  // namespace

CharClass classify(std::uint32_t cp) { return static_cast<CharClass>(class_table().at(cp)); }

std::uint8_t tik_bits(std::uint32_t cp) { return tik_table().at(cp); }

}  // namespace gpt::data::unicode
