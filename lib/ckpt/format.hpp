// Names and encodings of the checkpoint format that writer and reader share (internal).
#pragma once

#include <string>

#include "ckpt/attribute.hpp"
#include "ckpt/h5_util.hpp"
#include "core/dtype.hpp"

namespace gpt::ckpt {

inline constexpr const char* kFormatName = "gpt-pretrain checkpoint";
// 2: /_checkpoint/attributes_checksum covers the root attributes. Version 1 files (no
// such checksum) are still read; their attributes are not verified.
inline constexpr std::int64_t kFormatVersion = 2;
inline constexpr std::int64_t kOldestReadableVersion = 1;

// "_checkpoint/rank_blobs/<name>": holds datasets "bytes" and "offsets".
std::string blob_group(const std::string& name);

h5::Stored stored_type(DType t);
// The tensor dtype of a stored float type; false for bytes and integers.
bool tensor_dtype(h5::Stored t, DType& out);

// Attribute maps as bytes, to broadcast rank 0's copy.
std::string encode_attributes(const AttributeMap& attrs);
AttributeMap decode_attributes(const std::string& bytes);

// FNV-1a of the root attributes (names, types, values) together with /_checkpoint's
// iteration and world_size: a tampered lr_scheduler_num_steps or iteration is refused.
std::uint64_t attributes_checksum(const AttributeMap& root, std::int64_t iteration, std::int64_t world_size);

}  // namespace gpt::ckpt
