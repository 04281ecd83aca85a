#include "ckpt/dataset_io.hpp"

#include <vector>

#include "ckpt/checksum.hpp"

namespace gpt::ckpt {

h5::Handle file_selection(const Shape& global, const Selection& sel, const std::string& what) {
    std::vector<hsize_t> dims(global.begin(), global.end());
    h5::Handle space = h5::create_simple_space(static_cast<int>(dims.size()), dims.data());
    const std::vector<Box> boxes = sel.boxes(global);
    if (boxes.empty()) {
        h5::check_status(H5Sselect_none(space.get()), "selecting nothing in " + what);
        return space;
    }
    bool first = true;
    for (const Box& b : boxes) {
        std::vector<hsize_t> start(b.offset.begin(), b.offset.end()), count(b.count.begin(), b.count.end());
        h5::check_status(H5Sselect_hyperslab(space.get(), first ? H5S_SELECT_SET : H5S_SELECT_OR,
                                             start.data(), nullptr, count.data(), nullptr),
                         "selecting a hyperslab of " + what);
        first = false;
    }
    return space;
}

h5::Handle memory_selection(std::int64_t n, const std::string& what) {
    const hsize_t dims[1] = {static_cast<hsize_t>(n > 0 ? n : 1)};
    h5::Handle space = h5::create_simple_space(1, dims);
    if (n == 0) h5::check_status(H5Sselect_none(space.get()), "selecting nothing in memory for " + what);
    return space;
}

std::uint64_t checksum_selection(const Shape& global, const Selection& sel, std::size_t esize,
                                 const void* data) {
    std::uint64_t sum = 0;
    const auto* p = static_cast<const unsigned char*>(data);
    for (const Box& b : sel.boxes(global)) {
        for_each_run(global, b, [&](std::int64_t start, std::int64_t len) {
            const std::size_t bytes = static_cast<std::size_t>(len) * esize;
            sum = checksum_add(sum, checksum_bytes(static_cast<std::uint64_t>(start) * esize, p, bytes));
            p += bytes;
        });
    }
    return sum;
}

}  // namespace gpt::ckpt
