// The checkpoint manifest (/_checkpoint/manifest, text) parsed on its own, on any bytes:
// parse_manifest accepts or throws DataError, and what it accepts survives
// encode_manifest -> parse_manifest unchanged (names, types, shapes, checksums).
#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/manifest.hpp"
#include "core/errors.hpp"
#include "fuzz_util.hpp"

using namespace gpt::ckpt;

namespace {
bool same(const std::vector<ManifestEntry>& a, const std::vector<ManifestEntry>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].name != b[i].name || a[i].type != b[i].type || a[i].shape != b[i].shape || a[i].checksum != b[i].checksum)
            return false;
    return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    std::vector<ManifestEntry> entries;
    try {
        entries = parse_manifest(text, "fuzz.h5");
    } catch (const gpt::DataError&) {
        return 0;
    }
    for (const auto& e : entries)
        for (auto d : e.shape)
            if (d < 0) gpt::fuzz::fail("a negative dimension was accepted");
    std::vector<ManifestEntry> again;
    try {
        again = parse_manifest(encode_manifest(entries), "fuzz.h5");
    } catch (const gpt::DataError& e) {
        gpt::fuzz::fail(std::string("an accepted manifest does not re-parse after encoding: ") + e.what());
    }
    if (!same(entries, again)) gpt::fuzz::fail("encode_manifest(parse_manifest(x)) parses to other entries");
    return 0;
}
