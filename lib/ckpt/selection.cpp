#include "ckpt/selection.hpp"

#include <algorithm>
#include <sstream>

#include "core/errors.hpp"

namespace gpt::ckpt {

Selection Selection::box(Shape offset, Shape count) {
    Selection s(Kind::Box);
    s.offset_ = std::move(offset);
    s.count_ = std::move(count);
    return s;
}

Selection Selection::flat(std::int64_t offset, std::int64_t count) {
    Selection s(Kind::Flat);
    s.flat_offset_ = offset;
    s.flat_count_ = count;
    return s;
}

Selection Selection::flat_in_box(Shape offset, Shape count, std::int64_t flat_offset, std::int64_t flat_count) {
    Selection s(Kind::FlatInBox);
    s.offset_ = std::move(offset);
    s.count_ = std::move(count);
    s.flat_offset_ = flat_offset;
    s.flat_count_ = flat_count;
    return s;
}

std::int64_t num_elements(const Shape& shape) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

std::string shape_string(const Shape& shape) {
    std::ostringstream os;
    os << '[';
    for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
    os << ']';
    return os.str();
}

void Selection::check_fits(const Shape& global, const char* tensor_kind,
                           const std::string& tensor) const {
    GPT_REQUIRE(!global.empty(), InternalError, tensor_kind, " '", tensor,
                "': global shape must have at least one dimension (store scalars as [1])");
    for (auto d : global)
        GPT_REQUIRE(d > 0, InternalError, tensor_kind, " '", tensor, "': global shape ",
                    shape_string(global), " has a non-positive dimension");
    switch (kind_) {
        case Kind::None:
        case Kind::All: return;
        case Kind::Flat:
            GPT_REQUIRE(flat_offset_ >= 0 && flat_count_ >= 0 &&
                            flat_offset_ + flat_count_ <= ckpt::num_elements(global),
                        InternalError, tensor_kind, " '", tensor, "': flat range [", flat_offset_,
                        ", ", flat_offset_ + flat_count_, ") outside its ", ckpt::num_elements(global),
                        " elements");
            return;
        case Kind::Box:
        case Kind::FlatInBox:
            GPT_REQUIRE(offset_.size() == global.size() && count_.size() == global.size(),
                        InternalError, tensor_kind, " '", tensor, "': box rank ", offset_.size(),
                        "/", count_.size(), " differs from the tensor's rank ", global.size());
            for (std::size_t d = 0; d < global.size(); ++d)
                GPT_REQUIRE(offset_[d] >= 0 && count_[d] >= 0 && offset_[d] + count_[d] <= global[d],
                            InternalError, tensor_kind, " '", tensor, "': box offset ",
                            shape_string(offset_), " count ", shape_string(count_),
                            " outside the global shape ", shape_string(global));
            if (kind_ == Kind::FlatInBox)
                GPT_REQUIRE(flat_offset_ >= 0 && flat_count_ >= 0 &&
                                flat_offset_ + flat_count_ <= ckpt::num_elements(count_),
                            InternalError, tensor_kind, " '", tensor, "': flat range [", flat_offset_,
                            ", ", flat_offset_ + flat_count_, ") outside the ", ckpt::num_elements(count_),
                            " elements of its box");
            return;
    }
}

std::int64_t Selection::num_elements(const Shape& global) const {
    switch (kind_) {
        case Kind::None: return 0;
        case Kind::All: return ckpt::num_elements(global);
        case Kind::Flat:
        case Kind::FlatInBox: return flat_count_;
        case Kind::Box: return ckpt::num_elements(count_);
    }
    return 0;
}

namespace {
// A flat range [pos, end) of a row-major tensor of shape `shape` becomes at most 2*rank-1
// boxes: a ragged head climbing to ever coarser aligned blocks, a middle of whole outer
// blocks, and a ragged tail descending again. Each step takes the coarsest block size the
// current position is aligned to.
std::vector<Box> flat_range_boxes(const Shape& shape, std::int64_t pos, std::int64_t end) {
    const int nd = static_cast<int>(shape.size());
    std::vector<std::int64_t> stride(nd, 1);
    for (int d = nd - 2; d >= 0; --d) stride[d] = stride[d + 1] * shape[d + 1];
    std::vector<Box> out;
    while (pos < end) {
        int level = nd - 1;
        for (int d = 0; d < nd; ++d)
            if (pos % stride[d] == 0 && pos + stride[d] <= end) {
                level = d;
                break;
            }
        Box b{Shape(nd, 0), Shape(nd, 0)};
        std::int64_t rest = pos;
        for (int d = 0; d < nd; ++d) {
            b.offset[d] = rest / stride[d];
            rest %= stride[d];
        }
        const std::int64_t blocks = std::min((end - pos) / stride[level], shape[level] - b.offset[level]);
        for (int d = 0; d < nd; ++d) {
            if (d < level) b.count[d] = 1;
            else if (d == level) b.count[d] = blocks;
            else b.count[d] = shape[d];  // offset is 0 here: pos is aligned to stride[level]
        }
        out.push_back(std::move(b));
        pos += blocks * stride[level];
    }
    return out;
}
}  // namespace

std::vector<Box> Selection::boxes(const Shape& global) const {
    const int nd = static_cast<int>(global.size());
    switch (kind_) {
        case Kind::None: return {};
        case Kind::All: return {Box{Shape(nd, 0), global}};
        case Kind::Box:
            if (ckpt::num_elements(count_) == 0) return {};
            return {Box{offset_, count_}};
        case Kind::Flat: return flat_range_boxes(global, flat_offset_, flat_offset_ + flat_count_);
        case Kind::FlatInBox: {
            // Row-major order inside the box is the tensor's row-major order restricted to
            // the box, so the shifted boxes keep HDF5's walk and the packed order equal.
            std::vector<Box> out = flat_range_boxes(count_, flat_offset_, flat_offset_ + flat_count_);
            for (Box& b : out)
                for (int d = 0; d < nd; ++d) b.offset[d] += offset_[d];
            return out;
        }
    }
    return {};
}

bool Selection::is_contiguous(const Shape& global) const {
    if (kind_ == Kind::Flat || kind_ == Kind::None || kind_ == Kind::All) return true;
    int runs = 0;
    for (const Box& b : boxes(global)) {
        for_each_run(global, b, [&](std::int64_t, std::int64_t) { ++runs; });
        if (runs > 1) return false;
    }
    return true;
}

std::int64_t Selection::flat_start(const Shape& global) const {
    std::int64_t start = 0;
    bool first = true;
    for (const Box& b : boxes(global))
        for_each_run(global, b, [&](std::int64_t s, std::int64_t) {
            if (first) start = s;
            first = false;
        });
    return start;
}

std::uint64_t Selection::hash(std::uint64_t h) const {
    auto mix = [&h](const void* p, std::size_t n) {
        const auto* c = static_cast<const unsigned char*>(p);
        for (std::size_t i = 0; i < n; ++i) {
            h ^= c[i];
            h *= 1099511628211ull;
        }
    };
    mix(&kind_, sizeof kind_);
    mix(offset_.data(), offset_.size() * sizeof(std::int64_t));
    mix(count_.data(), count_.size() * sizeof(std::int64_t));
    mix(&flat_offset_, sizeof flat_offset_);
    mix(&flat_count_, sizeof flat_count_);
    return h;
}

}  // namespace gpt::ckpt
