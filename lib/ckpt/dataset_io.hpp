// Selections as HDF5 dataspaces, and checksums of packed selections (internal to lib/ckpt).
#pragma once

#include <algorithm>
#include <cstdint>

#include "ckpt/h5_util.hpp"
#include "ckpt/selection.hpp"

namespace gpt::ckpt {

// A file dataspace of `global` with `sel` selected (a union of hyperslabs; none when empty).
h5::Handle file_selection(const Shape& global, const Selection& sel, const std::string& what);
// A 1-D memory dataspace of n packed elements (all selected; none when n == 0).
h5::Handle memory_selection(std::int64_t n, const std::string& what);
// Partial checksum of the packed elements `data` that `sel` picks from a tensor of shape
// `global` with element size `esize` (see checksum.hpp).
std::uint64_t checksum_selection(const Shape& global, const Selection& sel, std::size_t esize,
                                 const void* data);

// Independent I/O of a contiguous selection in pieces of about `chunk_bytes`, calling
// io(piece_selection, piece_memory_offset_bytes) for each: the caller checksums each piece
// right after reading it (or right before writing it), while it is still in cache, instead
// of a second pass over a buffer larger than the cache.
inline constexpr std::size_t kIoChunkBytes = std::size_t(4) << 20;
template <typename Io>
void for_each_piece(const Shape& global, const Selection& sel, std::size_t esize, Io&& io) {
    const std::int64_t n = sel.num_elements(global);
    if (n == 0 || !sel.is_contiguous(global)) {
        io(sel, std::size_t{0});
        return;
    }
    const std::int64_t start = sel.flat_start(global);
    const std::int64_t chunk = std::max<std::int64_t>(1, static_cast<std::int64_t>(kIoChunkBytes / esize));
    for (std::int64_t off = 0; off < n; off += chunk)
        io(Selection::flat(start + off, std::min(chunk, n - off)), static_cast<std::size_t>(off) * esize);
}

}  // namespace gpt::ckpt
