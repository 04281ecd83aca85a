// The checkpoint's table of contents: every dataset with its element type, global shape and
// checksum, stored as text in /_checkpoint/manifest (readable with h5dump). The reader
// trusts nothing else: a dataset the manifest lists must exist with exactly that shape.
#pragma once

#include <string>
#include <vector>

#include "ckpt/h5_util.hpp"
#include "ckpt/selection.hpp"

namespace gpt::ckpt {

struct ManifestEntry {
    std::string name;  // dataset path without the leading '/'
    h5::Stored type;
    Shape shape;
    std::uint64_t checksum = 0;
};

std::string encode_manifest(const std::vector<ManifestEntry>& entries);
// Throws DataError naming `file` and the bad line.
std::vector<ManifestEntry> parse_manifest(const std::string& text, const std::string& file);

// Throws InternalError unless `name` is a valid dataset path for a tensor: letters, digits,
// '_', '.', '-' and '/' separators, no empty or dot-only components, not under "_checkpoint".
void check_tensor_name(const std::string& name);

inline constexpr const char* kReservedGroup = "_checkpoint";

}  // namespace gpt::ckpt
