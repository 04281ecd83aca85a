// Two-stage lookup table over the generated category ranges: 4352 blocks of 256 code
// points, identical blocks shared, so a lookup is two loads and the table stays ~40 KB.
#include <array>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/unicode_tables.hpp"

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

struct Table {
    std::vector<std::uint16_t> block_of;   // [kNumBlocks]: index into blocks
    std::vector<std::uint8_t> blocks;      // [num_unique_blocks * kBlockSize]

    Table() {
        std::vector<std::uint8_t> flat(kMaxCodePoint + 1, static_cast<std::uint8_t>(CharClass::Other));
        auto paint = [&](const CodePointRange* r, std::size_t n, CharClass c) {
            for (std::size_t i = 0; i < n; ++i)
                for (std::uint32_t cp = r[i].first; cp <= r[i].last; ++cp)
                    flat[cp] = static_cast<std::uint8_t>(c);
        };
        paint(kLetterRanges, kLetterRanges_count, CharClass::Letter);
        paint(kNumberRanges, kNumberRanges_count, CharClass::Number);
        for (std::uint32_t cp = 0; cp <= 0x3000; ++cp)
            if (is_white_space(cp)) flat[cp] = static_cast<std::uint8_t>(CharClass::Space);

        block_of.resize(kNumBlocks);
        std::unordered_map<std::string, std::uint16_t> seen;
        for (std::uint32_t b = 0; b < kNumBlocks; ++b) {
            std::string block(flat.begin() + b * kBlockSize, flat.begin() + (b + 1) * kBlockSize);
            auto [it, inserted] = seen.emplace(block, static_cast<std::uint16_t>(seen.size()));
            if (inserted) blocks.insert(blocks.end(), block.begin(), block.end());
            block_of[b] = it->second;
        }
    }
};

const Table& table() {
    static const Table t;
    return t;
}

}  // namespace

CharClass classify(std::uint32_t cp) {
    if (cp > kMaxCodePoint) return CharClass::Other;
    const Table& t = table();
    return static_cast<CharClass>(t.blocks[(static_cast<std::size_t>(t.block_of[cp >> kBlockBits]) << kBlockBits) |
                                           (cp & (kBlockSize - 1))]);
}

}  // namespace gpt::data::unicode
