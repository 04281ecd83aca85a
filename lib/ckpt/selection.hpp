// Which elements of a global tensor one rank saves or loads: nothing, all of it, an N-D box
// (a tensor-/pipeline-parallel shard), a contiguous range of the row-major flattened tensor
// (a distributed-optimizer shard, which may start and end inside a row), or such a range
// of a box (the distributed optimizer's shard of a tensor-parallel slice: its flat buffer
// holds the local slice, so its range is flat in the slice, not in the global tensor).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpt::ckpt {

using Shape = std::vector<std::int64_t>;

// An N-D block of a tensor: offset and count per dimension.
struct Box {
    Shape offset;
    Shape count;
};

class Selection {
public:
    enum class Kind { None, All, Box, Flat, FlatInBox };

    static Selection none() { return Selection(Kind::None); }
    static Selection all() { return Selection(Kind::All); }
    static Selection box(Shape offset, Shape count);
    // Elements [offset, offset + count) of the row-major flattened tensor.
    static Selection flat(std::int64_t offset, std::int64_t count);
    // Elements [flat_offset, flat_offset + flat_count) of the box (offset, count) flattened
    // row-major on its own.
    static Selection flat_in_box(Shape offset, Shape count, std::int64_t flat_offset, std::int64_t flat_count);

    Kind kind() const { return kind_; }
    const Shape& offset() const { return offset_; }
    const Shape& count() const { return count_; }
    std::int64_t flat_offset() const { return flat_offset_; }
    std::int64_t flat_count() const { return flat_count_; }

    // Throws InternalError naming `tensor` when the selection does not fit `global`.
    void check_fits(const Shape& global, const char* tensor_kind, const std::string& tensor) const;
    std::int64_t num_elements(const Shape& global) const;
    // Disjoint boxes in row-major order of the tensor. Host memory holds the selected
    // elements packed in exactly this order (row-major inside each box): HDF5 walks a union
    // of hyperslabs in the file's row-major order, and for a flat range that order is the
    // flat order, so memory can stay one contiguous 1-D buffer.
    std::vector<Box> boxes(const Shape& global) const;
    // True when the selected elements are one contiguous run of the flattened tensor (or
    // none): such a piece is best written or read by its rank alone (independent I/O).
    bool is_contiguous(const Shape& global) const;
    // The flat start of a contiguous selection (see is_contiguous); 0 when it is empty.
    std::int64_t flat_start(const Shape& global) const;
    // Folds the selection into an FNV-1a hash (ranks compare selections by it).
    std::uint64_t hash(std::uint64_t h) const;

private:
    explicit Selection(Kind k) : kind_(k) {}
    Kind kind_;
    Shape offset_, count_;
    std::int64_t flat_offset_ = 0, flat_count_ = 0;
};

std::int64_t num_elements(const Shape& shape);
std::string shape_string(const Shape& shape);  // "[4, 8]"

// Calls fn(flat_start, length) for each maximal contiguous run of `box` in the flattened
// tensor, in row-major order. Runs merge trailing dimensions the box covers fully.
template <typename Fn>
void for_each_run(const Shape& global, const Box& box, Fn&& fn) {
    const int nd = static_cast<int>(global.size());
    std::vector<std::int64_t> stride(nd, 1);
    for (int d = nd - 2; d >= 0; --d) stride[d] = stride[d + 1] * global[d + 1];
    for (int d = 0; d < nd; ++d)
        if (box.count[d] == 0) return;
    // Innermost dimension `inner` such that every dimension after it is covered fully.
    int inner = nd - 1;
    while (inner > 0 && box.count[inner] == global[inner] && box.offset[inner] == 0) --inner;
    const std::int64_t run = box.count[inner] * stride[inner];
    std::vector<std::int64_t> idx(inner, 0);  // position inside the outer dimensions
    while (true) {
        std::int64_t start = box.offset[inner] * stride[inner];
        for (int d = 0; d < inner; ++d) start += (box.offset[d] + idx[d]) * stride[d];
        fn(start, run);
        int d = inner - 1;
        while (d >= 0 && ++idx[d] == box.count[d]) idx[d--] = 0;
        if (d < 0) return;
    }
}

}  // namespace gpt::ckpt
